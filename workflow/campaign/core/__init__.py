"""The campaign's machinery, shared by every phase: params and their schema, content keys, the
store and the runner, hashing, file utilities, errors. Nothing here imports a phase."""

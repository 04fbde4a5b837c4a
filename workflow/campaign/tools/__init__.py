"""The user's tools that are not stages: status, gc, verify, the demo corpus generator."""

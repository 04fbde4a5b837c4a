# Evaluate phase: the reference floor (majority class, TF-IDF + logistic regression on the same
# train split), then every variant scored on the same items, compared and decided.
# An adaptive campaign's looks (ablation.adaptive): which runs each look has, read from
# the look checkpoints; the inputs that expand over looks ask these.
def read_look(look):
    """A finished look's record (results/adaptive/look_<look>.json), asked of its checkpoint."""
    with open(checkpoints.look.get(look=str(look)).output.look, encoding="utf-8") as f:
        return json.load(f)


def look_runs(look):
    """The runs look `look` evaluates: the plan's kept runs at the first, then the runs the
    look before it lists (those it had and those it appended)."""
    if int(look) > 1:
        return read_look(int(look) - 1)["runs"]
    if BUDGET_CUT:
        return kept_in_table(checkpoints.plan_table.get().output.runs)
    return RUNS


def final_look_runs():
    """The runs of the campaign's last look: the first look that appended nothing."""
    look = 1
    while True:
        record = read_look(look)
        if record["final"]:
            return record["runs"]
        look += 1


def look_paths(pattern):
    """Every look's record, the last one's included; none when ablation.adaptive is off."""
    if not ADAPTIVE:
        return []

    def paths(wildcards):
        looks = [read_look(1)]
        while not looks[-1]["final"]:
            looks.append(read_look(len(looks) + 1))
        return [pattern.format(look=j) for j in range(1, len(looks) + 1)]

    return paths


def look_run_paths(pattern):
    def paths(wildcards):
        return [pattern.format(run=run) for run in look_runs(wildcards.look)]

    return paths


def previous_look(pattern):
    def path(wildcards):
        look = int(wildcards.look)
        return [] if look == 1 else [pattern.format(look=look - 1)]

    return path


rule floor:
    input:
        **stage_inputs("floor"),
    output:
        **stage_outputs("floor"),
    log:
        "logs/floor/floor.log",
    benchmark:
        "logs/benchmarks/floor/floor.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("floor"),
    shell:
        stage_shell("floor")


rule evaluate:
    input:
        **stage_inputs("evaluate"),
    output:
        **stage_outputs("evaluate"),
    log:
        "logs/evaluate/evaluate.log",
    benchmark:
        "logs/benchmarks/evaluate/evaluate.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("evaluate"),
    shell:
        stage_shell("evaluate")


# An adaptive campaign (ablation.adaptive): after the plan's runs, and after each batch it
# appends, a look evaluates the runs so far on repeated confidence intervals and lists the runs
# to add (results/adaptive/look_<j>.json); the consumers of trained runs ask the looks
# (run_paths) which runs the campaign has once the last one is written.
if ADAPTIVE:

    wildcard_constraints:
        look=r"\d+",

    localrules:
        look,

    checkpoint look:
        input:
            **stage_inputs("look"),
        output:
            **stage_outputs("look"),
        log:
            "logs/look/look_{look}.log",
        benchmark:
            "logs/benchmarks/look/look_{look}.tsv"
        conda:
            CONDA_ENV
        params:
            **stage_params("look"),
        shell:
            stage_shell("look")

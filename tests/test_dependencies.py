"""Dependencies point one way: lower rooms of the package never import higher ones.

Read from the source (every import statement, also those inside functions), so a late
import cannot hide an upward dependency.
"""

import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).parent.parent / "albert_tf"

# What each room must not import. The training loop, the tasks and the scripts' apps sit
# on top; checkpoints know the model's variables by name only, not the optimizer or the
# loop; data knows nothing of the model.
FORBIDDEN = {
    # The demo (demo_app/, beside the package) is an application of the library: no
    # module of the package imports it.
    "albert_tf": ("demo_app",),
    # The checkpoint readers and writers of every layout (TF1, brightmart, Hugging Face,
    # release directories) sit above the models: they know variables by name only, not
    # the models, the optimizer, the loop or the data.
    "albert_tf.checkpoints": ("albert_tf.training", "albert_tf.apps", "albert_tf.modeling",
                              "albert_tf.data", "albert_tf.export", "albert_tf.tasks"),
    "albert_tf.config": ("albert_tf.training", "albert_tf.apps", "albert_tf.modeling",
                         "albert_tf.checkpoints", "albert_tf.data"),
    "albert_tf.fileio": ("albert_tf.",),
    # The one base of the user errors (`UserError`), which every room derives from.
    "albert_tf.errors": ("albert_tf.",),
    # The heads' tables are data (over the names of `albert_tf.names`): the models (their
    # Keras layers: albert_tf.modeling.heads), tf1_variables, convert and the checkpoint
    # readers read them, so they stay below the models and the readers.
    "albert_tf.task_heads": tuple(f"albert_tf.{room}" for room in (
        "apps", "checkpoints", "config", "convert", "data", "export", "modeling",
        "tasks", "training")),
    "albert_tf.data": ("albert_tf.training", "albert_tf.apps", "albert_tf.modeling",
                       "albert_tf.export", "albert_tf.tasks"),
    # The models read no file: `from_release` is handed its reader by the package.
    "albert_tf.modeling": ("albert_tf.training", "albert_tf.apps", "albert_tf.export",
                           "albert_tf.checkpoints", "albert_tf.tasks"),
    "albert_tf.export": ("albert_tf.training", "albert_tf.apps", "albert_tf.tasks"),
    # The tasks are run by the scripts' apps (`albert_tf.apps.driver`), never the other
    # way: what they share with the scripts (the run checks, results files, errors) sits
    # in the tasks' layer or below it.
    "albert_tf.tasks": ("albert_tf.apps", "albert_tf.scripts"),
    # The Keras text models stand on the tasks' models and the exports, beside the
    # scripts' apps: neither imports the other.
    "albert_tf.text_models": ("albert_tf.apps", "albert_tf.scripts"),
    # Metrics and results files serve the tasks and the runs alike.
    "albert_tf.evaluation": ("albert_tf.apps", "albert_tf.scripts", "albert_tf.tasks",
                             "albert_tf.training"),
    # The layouts know names and configs, not the release directories or each other.
    "albert_tf.checkpoints.brightmart": ("albert_tf.checkpoints.tf1",
                                         "albert_tf.checkpoints.release",
                                         "albert_tf.checkpoints.huggingface"),
    "albert_tf.checkpoints.huggingface": ("albert_tf.checkpoints.release",),
    # Generic pieces never import the readers of one data set: the records of sentence and
    # multiple-choice tasks serve GLUE and RACE and your files alike, and the task API
    # serves every task.
    "albert_tf.data.sentence_records": ("albert_tf.data.glue", "albert_tf.data.tabular"),
    "albert_tf.data.tabular": ("albert_tf.data.glue",),
    "albert_tf.data.choice_records": ("albert_tf.data.race", "albert_tf.data.multiple_choice"),
    "albert_tf.data.multiple_choice": ("albert_tf.data.race",),
    "albert_tf.tasks.base": ("albert_tf.data.glue", "albert_tf.data.race",
                             "albert_tf.data.ner", "albert_tf.data.squad"),
}


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: pathlib.Path) -> set[str]:
    """Every module `path` imports, absolute (`from albert_tf import x` gives both
    `albert_tf` and `albert_tf.x`: x may be a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package holding `path`
                package = module_name(path).split(".")
                if path.name != "__init__.py":
                    package = package[:-1]
                anchor = package[: len(package) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def modules_of(room: str) -> list[pathlib.Path]:
    path = PACKAGE.parent.joinpath(*room.split("."))
    if path.is_dir():
        return sorted(path.rglob("*.py"))
    return [path.with_suffix(".py")]


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_lower_rooms_do_not_import_higher_ones(room):
    upward = [f"{module_name(path)} imports {name}"
              for path in modules_of(room)
              for name in sorted(imports(path))
              if any(name == f or name.startswith(f if f.endswith(".") else f + ".")
                     for f in FORBIDDEN[room])]
    assert upward == []


def test_only_the_apps_the_tasks_and_the_loop_import_training():
    # (a task says its objective: albert_tf.training.objectives; the text models train
    # with the scripts' optimizer: albert_tf.training.optimizers)
    importers = sorted(
        module_name(path) for path in PACKAGE.rglob("*.py")
        if not module_name(path).startswith(("albert_tf.training", "albert_tf.apps",
                                             "albert_tf.tasks", "albert_tf.text_models"))
        and any(n == "albert_tf.training" or n.startswith("albert_tf.training.")
                for n in imports(path)))
    assert importers == []


def _member(name: str, package: str, modules) -> str | None:
    """The member of `package` that the module or name `name` lies in: a module or a
    subpackage directly in it, or the package itself (a name its __init__ defines);
    None outside it."""
    if name == package:
        return package
    if not name.startswith(package + "."):
        return None
    head = f"{package}.{name[len(package) + 1:].split('.')[0]}"
    return head if head in modules else package


def import_graph(package: str) -> dict[str, set[str]]:
    """Who imports whom among the members of `package`: its modules, its subpackages
    (each one node, for what any of its modules imports) and the package itself (its
    __init__, for the names it defines). A package named alone is no edge: `from P
    import x` names P beside P.x, and importing any module of P runs P's __init__."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    packages = {module_name(path) for path in PACKAGE.rglob("__init__.py")}
    graph = {}
    for name, path in modules.items():
        source = _member(name, package, modules)
        if source is None:
            continue
        targets = graph.setdefault(source, set())
        for imported in imports(path):
            target = None if imported in packages else _member(imported, package, modules)
            if target not in (None, source):
                targets.add(target)
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """A cycle of `graph` (its nodes in order, the first again at the end), or []."""
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for after in sorted(graph.get(node, ())):
            if state.get(after) == "open":
                return path[path.index(after):] + [after]
            found = visit(after) if after not in state else []
            if found:
                return found
        path.pop()
        state[node] = "done"
        return []

    for node in sorted(graph):
        found = visit(node) if node not in state else []
        if found:
            return found
    return []


PACKAGES = sorted(module_name(path) for path in PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_the_members_of_a_package_import_each_other_one_way(package):
    # Within each package (the export modules, the tasks, ...; and albert_tf's rooms,
    # each subpackage one node) no module imports, late or not, one that imports it
    # back, directly or through others: the lower one holds what both need.
    assert cycle(import_graph(package)) == []


def test_the_cycle_check_sees_cycles():
    assert {"albert_tf.export", "albert_tf.tasks"} <= set(PACKAGES)
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    # savedmodel and reusable take what both need from base, the lower one
    graph = import_graph("albert_tf.export")
    assert "albert_tf.export.base" in graph["albert_tf.export.savedmodel"]
    assert "albert_tf.export.base" in graph["albert_tf.export.reusable"]
    assert "albert_tf.export.reusable" in graph["albert_tf.export.savedmodel"]


def test_the_import_reader_sees_late_imports(tmp_path):
    # The check above is only as good as this reader: imports inside functions count.
    module = tmp_path / "late.py"
    module.write_text("def f():\n    from albert_tf.training.optimizers import Lamb\n")
    assert "albert_tf.training.optimizers" in imports(module)


def test_the_demo_lies_outside_the_package():
    # The rule above would pass vacuously were the demo back in the package.
    assert not list(PACKAGE.glob("demo*"))
    demo = PACKAGE.parent / "demo_app"
    assert {path.name for path in demo.glob("*.py")} >= {"steps.py", "data.py", "work.py"}


def test_where_things_are_lists_every_room_lowest_first():
    # docs/where-things-are.md: every path it lists exists, every room of the package is
    # listed, and a room imports only rooms listed above it.
    page = (PACKAGE.parent / "docs" / "where-things-are.md").read_text()
    listed = re.findall(r"^(\S+/|\S+\.py) {2,}", page.split("```")[1], flags=re.M)
    assert [p for p in listed if not (PACKAGE.parent / p).exists()] == []
    rooms = [f"albert_tf.{p[len('albert_tf/'):].rstrip('/').removesuffix('.py')}"
             for p in listed if p.startswith("albert_tf/")]
    graph = import_graph("albert_tf")
    assert sorted(rooms) == sorted(set(graph) - {"albert_tf"})
    upward = [f"{room} imports {other}" for i, room in enumerate(rooms)
              for other in sorted(graph[room]) if other in rooms[i + 1:]]
    assert upward == []

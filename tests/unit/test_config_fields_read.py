"""Every field of the config models is read by the program: a key the stack file may set, that the models check and
the reference documents, but that nothing passes on would be ignored (the guide: config the program does not read is
reported, never ignored; here the program itself would ignore it). A field counts as read where the program's code
(``stacks/``, ``__main__.py``) names it, as an attribute or as a string, outside the model validators that only check
it. The components' code does not count: a component argument of the same name is not the config key passed on."""

import ast
from typing import Iterable

from tests.config_support import config_models
from tests.harness import REPO
from tests.python_source import parse


def _is_validator(node: ast.AST) -> bool:
    """A pydantic validator: a function decorated with ``field_validator(...)`` or ``model_validator(...)``."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for d in node.decorator_list:
        call = d.func if isinstance(d, ast.Call) else d
        name = call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", "")
        if name.endswith("_validator"):
            return True
    return False


def names_read(sources: Iterable[str]) -> set[str]:
    """The attribute names and the strings the sources name, outside validators."""
    found: set[str] = set()

    def walk(node: ast.AST) -> None:
        if _is_validator(node):
            return
        if isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)
        for child in ast.iter_child_nodes(node):
            walk(child)

    for text in sources:
        walk(parse(text))
    return found


def config_fields() -> dict[str, list[str]]:
    """Each field name of the config models, with the models that have it."""
    found: dict[str, list[str]] = {}
    for name, cls in config_models().items():
        for field in cls.model_fields:
            found.setdefault(field, []).append(name)
    return found


def test_every_config_field_is_read_by_the_program() -> None:
    program = [p.read_text() for p in sorted((REPO / "stacks").rglob("*.py"))] + [(REPO / "__main__.py").read_text()]
    read = names_read(program)
    fields = config_fields()
    unread = sorted(f"{'/'.join(models)}.{name}" for name, models in fields.items() if name not in read)
    assert unread == [], (
        "config fields nothing in the program reads (a validator's check does not count): pass each on where the "
        "composition builds its component's arguments (stacks/environment.py, stacks/storage.py, stacks/workloads.py, "
        f"the kinds), or remove it: {unread}"
    )
    assert len(fields) > 120, len(fields)


def test_a_field_only_a_validator_reads_is_found() -> None:
    """Control: a field read only by its model's validator is not read; one a property reads, or the composition, is."""
    model = '''
class ImageBuildConfig(Model):
    queued_timeout_minutes: int = 60
    keep_images: int = 10

    @field_validator("queued_timeout_minutes")
    @classmethod
    def _bounds(cls, v): return v if v > 4 and cls.queued_timeout_minutes else v

    @property
    def kept(self): return self.keep_images
'''
    read = names_read([model])
    assert "keep_images" in read and "queued_timeout_minutes" not in read
    assert "queued_timeout_minutes" in names_read(
        [model, 'args = {"queued_timeout_minutes": cfg.queued_timeout_minutes}']
    )

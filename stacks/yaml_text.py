"""YAML text read and written as PyYAML's safe functions do, by libyaml when PyYAML has it."""

import shlex
from collections.abc import Iterable
from typing import Any

import yaml

#: libyaml's safe loader when PyYAML has it: the same objects as ``yaml.safe_load``, six times faster (``Pulumi.yaml``
#: is read on every plan; Kueue's CRDs are 1.7 MB).
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


#: libyaml's safe dumper when PyYAML has it: the documents ``yaml.safe_dump_all`` writes (its lines may wrap
#: elsewhere), eight times faster (the box hands kubectl Kueue's 1.8 MB of CRDs).
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_yaml_documents(docs: Iterable[Any]) -> str:
    """``docs`` as one multi-document YAML text, each mapping's keys in their order."""
    return yaml.dump_all(list(docs), Dumper=DUMPER, sort_keys=False)


def load_yaml(text: str) -> Any:
    """One YAML document, as ``yaml.safe_load`` reads it."""
    return yaml.load(text, Loader=LOADER)


def load_yaml_documents(text: str) -> list[Any]:
    """The non-empty documents of a multi-document YAML text, as ``yaml.safe_load_all`` reads them."""
    return [d for d in yaml.load_all(text, Loader=LOADER) if d]


def shell_words(text: str) -> list[str]:
    """``text`` split into words as a shell would (its quotes honoured), or on whitespace when its quotes do not
    close: the list a user meant by one string."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def quoted_list(words: Iterable[str]) -> str:
    """``words`` as a YAML flow list with each item quoted (``['--lr', '0.1']``): YAML 1.2, Pulumi's reader, takes
    ``0.1`` or ``08`` unquoted as numbers, where the config wants strings."""
    return yaml.safe_dump(
        list(words), default_flow_style=True, default_style="'", allow_unicode=True, width=10**6
    ).strip()

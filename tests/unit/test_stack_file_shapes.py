"""A stack file that is not what Pulumi reads stops the command-line tools with one message and exit 2 (no
traceback): YAML that is not a mapping, ``config:`` that is not one, a key given twice (Pulumi refuses it; PyYAML would
keep the last), YAML 1.1 booleans (``yes``: a string to Pulumi's YAML 1.2 reader, so the tools must not read it as
true), a top-level key Pulumi does not read (a setting outside ``config:``, a misspelt key), a secret the tools cannot
decrypt, and a file without ``config:`` (no ``aws:region``, as ``pulumi up`` would say)."""

from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
import yaml

from stacks.plan.report import main as plan_main
from stacks.stackfile import load_stack_yaml, read_stack_config

GROUP = "  eks-training:nodeGroups:\n    cpu: {instanceTypes: [m5.xlarge], minSize: 0, desiredSize: 1, maxSize: 2}\n"

CASES = [
    ("empty file", "", "aws:region: not set; run `pulumi config set aws:region us-east-1`"),
    ("no config key", "encryptionsalt: v1:abc\n", "aws:region: not set"),
    ("config left empty", "config:\n", "aws:region: not set"),
    (
        "not a mapping",
        "- aws:region: us-east-1\n",
        "a stack file is a YAML mapping (config: with <namespace>:<key> entries), not list",
    ),
    ("config a list", "config:\n  - aws:region\n", "config: must be a mapping of <namespace>:<key>: value"),
    (
        "a key twice",
        "config:\n  aws:region: us-east-1\n" + GROUP + "  eks-training:nodeGroups: {}\n",
        "the key 'eks-training:nodeGroups' is given twice (first on line 3); Pulumi refuses the file: merge the two",
    ),
    (
        "YAML 1.1 boolean",
        "config:\n  aws:region: us-east-1\n" + GROUP + "  eks-training:autoscaler: {enabled: no}\n",
        "eks-training:autoscaler.enabled: 'no' is a string, not a boolean; write false without quotes",
    ),
    ("invalid YAML", "config:\n  aws:region: [us-east-1\n", "cannot read"),
    (
        "a tab in the indentation",
        "config:\n  aws:region: us-east-1\n" + GROUP + "\t  eks-training:tags: {}\n",
        "line 5, column 1: found character that cannot start any token; indent with spaces (YAML does not allow "
        "tabs in indentation)",
    ),
    (
        "a tab in a block's indentation",
        "config:\n  aws:region: us-east-1\n" + GROUP + "  eks-training:tags:\n    team: a\n\t  owner: b\n",
        "line 7, column 1: found a tab character that violates indentation; indent with spaces",
    ),
    (
        "a setting outside config",
        "config:\n  aws:region: us-east-1\neks-training:nodeGroups:\n  cpu: {instanceTypes: [m5.xlarge]}\n",
        "eks-training:nodeGroups is at the top level, where Pulumi reads no setting: indent it under config:",
    ),
    (
        "a secret the command must read",
        "config:\n  aws:region: us-east-1\n" + GROUP + "  eks-training:tags:\n    team:\n      secure: v1:abc\n",
        "eks-training:tags.team: a secret (pulumi config set --secret), but the program writes this setting as plain "
        "text into the cluster's objects and the stack's state, so it would not stay secret (a job's env is plain "
        "text in its pod: no token or password there); only `pulumi up` and `pulumi preview` decrypt a secret, so "
        "this command cannot read it either: set it without --secret (pulumi config set KEY VALUE)",
    ),
    (
        "a secret of another namespace the command must read",
        "config:\n  aws:region: us-east-1\n" + GROUP + "  aws:assumeRoles:\n    secure: v1:abc\n",
        "aws:assumeRoles: a secret (pulumi config set --secret): only `pulumi up` and `pulumi preview` decrypt a "
        "secret, so this command cannot read it; to use it, set it without --secret (pulumi config set KEY VALUE)",
    ),
    (
        "config misspelt",
        "configs:\n  aws:region: us-east-1\n",
        "unknown top-level key configs (did you mean config?): a stack file holds only config, environment,",
    ),
]


@pytest.mark.parametrize("text,message", [pytest.param(t, m, id=i) for i, t, m in CASES])
def test_a_malformed_stack_file_is_one_message(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text)
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = plan_main(["--stack", "bad", "--stack-file", str(path)])
    assert code == 2, (code, out.getvalue(), err.getvalue())
    assert message in err.getvalue(), err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_the_reader_keeps_yaml_1_2_values() -> None:
    """The control: true/false stay booleans, numbers numbers, and what YAML 1.1 alone reads otherwise stays text."""
    data = load_stack_yaml("a: true\nb: False\nc: 2\nd: yes\ne: on\nf: 2024-01-01\ng: 1.5\nh: =\n")
    assert data == {"a": True, "b": False, "c": 2, "d": "yes", "e": "on", "f": "2024-01-01", "g": 1.5, "h": "="}


@pytest.mark.parametrize(
    "text,value",
    [
        ("1:30", "1:30"),  # YAML 1.1's base 60 (90 in PyYAML's safe loader) is text to yaml.v3
        ("1:30.5", "1:30.5"),
        ("0o10", 8),  # YAML 1.2's octal (text in PyYAML's)
        ("0O10", 8),  # Go reads a prefix in either case
        ("0X1F", 31),
        ("0b101", 5),
        ("010", 8),  # 1.1's leading-zero octal, which yaml.v3 keeps (ParseInt with base 0)
        ("09", 9),  # no octal, so yamlStyleFloat's 9.0, passed as JSON's 9
        ("1_000", 1000),
        ("-3", -3),
        ("1e3", 1000),  # an exponent without a dot or a sign (text in PyYAML's), a whole float: an int in JSON
        ("1.0", 1),
        ("1.30", 1.3),
        (".5", 0.5),
        ("1e21", 1e21),  # Go's JSON writes it with an exponent: a float still
        ("1e999", "1e999"),  # beyond a float64: ParseFloat fails, the text stays
        (".inf", ".inf"),  # yaml.v3's infinity, which Pulumi cannot pass as JSON: the models refuse the text
        (".nan", ".nan"),
        ("0x_", "0x_"),
        ("v1", "v1"),
        ("1.2.3", "1.2.3"),
    ],
)
def test_numbers_read_as_the_program_receives_them(text: str, value: object) -> None:
    """Pulumi reads a stack file with Go's gopkg.in/yaml.v3, whose resolve() reads numbers with Go's strconv
    (resolve.go: ParseInt(s, 0, 64) without the underscores, then yamlStyleFloat), and passes each value to the
    program as JSON (encoding/json writes a whole float below 1e21 without a fraction): the tools read each as the
    program receives it, so `plan` never accepts a value `pulumi up` refuses, or the other way round."""
    read = load_stack_yaml(f"a: {text}\n")["a"]
    assert read == value and type(read) is type(value), read


def test_a_merge_key_gives_its_mapping_defaults() -> None:
    """YAML's merge key, which Go's yaml.v3 reads too: the anchored mapping's keys, the mapping's own over them (not a
    key given twice)."""
    data = load_stack_yaml("a: &g {x: 1, y: 2}\nb:\n  <<: *g\n  y: 3\n")
    assert data == {"a": {"x": 1, "y": 2}, "b": {"x": 1, "y": 3}}
    # a merged mapping that merges another, read after the mapping that merges it: still no key given twice
    nested = load_stack_yaml("c: &c {A: 1}\nj:\n  env: &e {<<: *c, TEAM: nlp}\nt: {<<: *e}\n")
    assert nested["t"] == {"A": 1, "TEAM": "nlp"}


def test_a_merge_key_written_twice_is_refused() -> None:
    """yaml.v3 counts ``<<`` as a key like any other: twice in one mapping is an error."""
    with pytest.raises(yaml.YAMLError, match="the key '<<' is given twice"):
        load_stack_yaml("a: &g {x: 1}\nb: {<<: *g, <<: *g}\n")
    # yaml.v3 compares a key's text: 1 and "1" are one key written twice
    with pytest.raises(yaml.YAMLError, match="the key '1' is given twice"):
        load_stack_yaml('1: a\n"1": b\n')


def test_the_aws_providers_static_keys_may_be_secrets(tmp_path: Path) -> None:
    """The control of the secret refusal: aws:secretKey as a secret is read (the program only notes that it is set)."""
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text("config:\n  aws:region: us-east-1\n  aws:secretKey:\n    secure: v1:abc\n" + GROUP)
    _, config = read_stack_config("mine", path)
    assert config["aws:secretKey"] == {"secure": "v1:abc"}

"""Packaging beyond pyproject.toml: the images' build folders (``training/``, ``images/``) ship inside the installed
package as ``stacks/_shipped/training`` and ``stacks/_shipped/images`` (found by :mod:`stacks.bundle`), so an installed
package builds and runs the images it names; the repository keeps its layout."""

from setuptools import find_packages, setup

BUNDLE = {"stacks._shipped.training": "training", "stacks._shipped.images": "images"}

setup(
    packages=[*find_packages(include=["components", "components.*", "stacks", "stacks.*"]), *BUNDLE],
    package_dir=BUNDLE,
    package_data={
        "stacks._shipped.training": ["*", ".dockerignore"],
        "stacks._shipped.images": ["*/*", "*/.dockerignore"],
    },
    exclude_package_data={"": ["__pycache__/*", "*.pyc"]},
)

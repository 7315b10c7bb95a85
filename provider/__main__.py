"""Hosts the component library as a Pulumi package (``pulumi package add``): TypeScript, Go, C#, Java and
YAML programs use the components through the schema Pulumi infers from their type annotations.

Runs from this folder of a clone of the repository; the library (``components/``) is the folder above.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi.provider.experimental import component_provider_host  # noqa: E402

from components import COMPONENTS, PACKAGE_NAME, __version__  # noqa: E402

if __name__ == "__main__":
    component_provider_host(components=list(COMPONENTS), name=PACKAGE_NAME, version=__version__)

"""The source base: an airbyte-cdk ``AbstractSource``, so Airbyte's own tools run it unchanged."""

from __future__ import annotations

import json
import logging
import os
import re
from abc import ABC
from collections.abc import Mapping
from typing import Any

import yaml
from airbyte_cdk.models import ConnectorSpecification, ConnectorSpecificationSerializer
from airbyte_cdk.sources import AbstractSource

from source_framework.helpers.defining_file import defining_folder, top_package_folder


class Source(AbstractSource, ABC):
    """Base class for a connector: implement ``check_connection`` and ``streams``.

    ``spec()`` reads ``spec_json``, else ``spec_file`` beside the defining file or its package, then each base class's.
    """

    source_name: str = ""
    spec_file: str = "spec.json"
    spec_json: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.source_name or re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower()

    def spec(self, logger: logging.Logger) -> ConnectorSpecification:
        spec = self.spec_json
        if spec is None:
            path = self._spec_path()
            with open(path, encoding="utf-8") as handle:
                spec = yaml.safe_load(handle) if path.endswith((".yaml", ".yml")) else json.load(handle)
        return ConnectorSpecificationSerializer.load(dict(spec))

    def _spec_path(self) -> str:
        names = ("spec.json", "spec.yaml") if self.spec_file == "spec.json" else (self.spec_file,)
        folders: dict[str, None] = {}
        for cls in type(self).__mro__:
            if isinstance(cls, type) and issubclass(cls, Source) and cls is not Source:
                folders.update(dict.fromkeys(f for f in (defining_folder(cls), top_package_folder(cls)) if f))
        for folder in folders:
            found = [os.path.join(folder, name) for name in names if os.path.isfile(os.path.join(folder, name))]
            if len(found) > 1:
                raise RuntimeError(f"source {type(self).__name__}: both {' and '.join(found)} exist; keep one of them")
            if found:
                return found[0]
        looked = ", ".join(os.path.join(folder, " or ".join(names)) for folder in folders) or "(no folder: the class has no file)"
        raise FileNotFoundError(
            f"source {type(self).__name__} has no spec: looked for {looked}; put the "
            f"connector's spec there, or set spec_json on the class"
        )

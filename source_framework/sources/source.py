"""The source base: an airbyte-cdk ``AbstractSource``, so Airbyte's own tools run it unchanged.

::

    class MySource(Source):
        source_name = "my_api"            # the table folder when streams have no namespace
        spec_file = "spec.json"            # beside this module (or set ``spec_json``)

        def check_connection(self, logger, config):
            ...
            return True, None

        def streams(self, config):
            return [Users(config), Orders(config)]

    if __name__ == "__main__":
        launch(MySource(), sys.argv[1:])
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
from abc import ABC
from collections.abc import Mapping
from typing import Any

from airbyte_cdk.models import ConnectorSpecification, ConnectorSpecificationSerializer
from airbyte_cdk.sources import AbstractSource


class Source(AbstractSource, ABC):
    """Base class for a connector: implement ``check_connection`` and ``streams``.

    ``spec()`` reads ``spec_json`` if set, else the JSON file ``spec_file`` in the folder of the
    module that defines the subclass, or of a base class's module (a subclass of a connector in
    another folder keeps its spec); the CDK looks only in the top-level package.
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
            with open(self._spec_path(), encoding="utf-8") as handle:
                spec = json.load(handle)
        return ConnectorSpecificationSerializer.load(dict(spec))

    def _spec_path(self) -> str:
        looked = []
        for cls in type(self).__mro__:
            if not (isinstance(cls, type) and issubclass(cls, Source)) or cls is Source:
                continue
            module = importlib.import_module(cls.__module__)
            path = os.path.join(os.path.dirname(os.path.abspath(module.__file__ or "")), self.spec_file)
            if os.path.isfile(path):
                return path
            looked.append(path)
        raise FileNotFoundError(
            f"source {type(self).__name__} has no spec: looked for {', '.join(dict.fromkeys(looked))}; put the "
            f"connector's spec there, or set spec_json on the class"
        )

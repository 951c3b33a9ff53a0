"""Facts about an OME-Zarr hierarchy, for people: the inspector dock and ``napari-ozx info``.

* :mod:`.tree` - :class:`TreeNode` and the lazy hierarchy (plates, wells and fields
  are loaded when expanded);
* :mod:`.facts` - :class:`NodeDetails`, :class:`ArrayFacts`, :class:`ExtensionInfo`,
  codec descriptions from zarr's parsed metadata;
* :mod:`.archive` - :class:`ArchiveFacts` of an ``.ozx`` and its RFC-9 findings;
* :mod:`.source` - :class:`Inspection`, which ties them together (thread-safe);
* :mod:`.tables` - an image's or a plate's tables, listed, and a table's first rows;
* :mod:`.render` - plain text and JSON for the command line.

Documents are read by :mod:`napari_ozx.ngff.read.documents`, the opener's own reader. This
package imports ``ngff``, ``ozx`` and ``errors`` only: no napari, no Qt.
"""

from __future__ import annotations

from napari_ozx.inspection._text import format_bytes, pretty_json
from napari_ozx.inspection.archive import ArchiveFacts, MetadataFacts
from napari_ozx.inspection.facts import (
    ArrayFacts,
    ExtensionInfo,
    NodeDetails,
    Row,
    Section,
    describe_codec,
)
from napari_ozx.inspection.render import info_report, info_text
from napari_ozx.inspection.source import Inspection
from napari_ozx.inspection.tables import TablePreview
from napari_ozx.inspection.tree import TreeNode

__all__ = [
    "ArchiveFacts",
    "ArrayFacts",
    "ExtensionInfo",
    "Inspection",
    "MetadataFacts",
    "NodeDetails",
    "Row",
    "Section",
    "TablePreview",
    "TreeNode",
    "describe_codec",
    "format_bytes",
    "info_report",
    "info_text",
    "pretty_json",
]

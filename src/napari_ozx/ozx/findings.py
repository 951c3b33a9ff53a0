"""The one finding type of both validators: RFC-9 / ZIP (:mod:`.validate`) and the
OME-Zarr metadata rules (:mod:`napari_ozx.ngff.validate.rules`).

A finding is one rule broken (or, for warnings, not followed) at one place: an archive
member, or a node of the hierarchy ("/" for the root). ``napari-ozx validate --json``
prints :meth:`Finding.to_dict`; people read ``str(finding)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Finding", "Severity"]

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One finding of a validator (RFC-9 / ZIP, or the OME-Zarr rules).

    Parameters
    ----------
    severity : {"error", "warning", "info"}
        ``error``: a MUST broken or unsafe content; ``warning``: a SHOULD not followed;
        ``info``: a summary.
    code : str
        The finding's code (``zip64-missing``, ``ome-namespace`` ...).
    message : str
        What was found.
    member : str, optional
        Where: an archive member, or a hierarchy node ("/": the root).
    rule : str, optional
        The rule, quoted.
    section : str, optional
        Where the rule is stated (the OME-Zarr rules).
    """

    severity: Severity
    code: str
    message: str  #: what was found
    member: str | None = None  #: where: an archive member, or a hierarchy node ("/": root)
    rule: str | None = None  #: the rule, quoted
    section: str | None = None  #: where the rule is stated (the OME-Zarr rules)

    @property
    def node(self) -> str:
        """The place as a hierarchy node ("/" for the root)."""
        return self.member or "/"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "member": self.member,
            "rule": self.rule,
        }
        if self.section is not None:
            out["section"] = self.section
        return out

    def __str__(self) -> str:
        where = f" [{self.member}]" if self.member else ""
        return f"{self.severity.upper()} {self.code}{where}: {self.message}"

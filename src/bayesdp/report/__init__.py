"""Reports of releases: self-contained HTML with the released table, plots and the guarantee."""

from bayesdp.report.html import write_curator_report, write_release_report

__all__ = ["write_curator_report", "write_release_report"]

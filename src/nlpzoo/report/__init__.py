"""The report: tables, figures and the document, built from what the runs wrote (no torch)."""

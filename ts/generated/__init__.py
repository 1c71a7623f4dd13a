"""Python written from the frontend's key tables (org.tserve.config.PythonKeys): do not edit by hand."""

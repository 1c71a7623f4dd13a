"""torch-workflow-archiver for tserve: packages a workflow (DAG spec + handler) into a .war.

Python API::

    from workflow_archiver.workflow_packaging import package_workflow
    path = package_workflow(WorkflowArchiverConfig(workflow_name="wf", spec_file="spec.yaml",
                                                   handler="handler.py", export_path="."))
"""

from model_archiver.version import __version__

__all__ = ["__version__"]

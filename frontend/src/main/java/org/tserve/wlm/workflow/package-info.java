/**
 * Workflows (TorchServe's .war): a DAG of models and Python functions served as one endpoint.
 * {@link org.tserve.wlm.workflow.WorkflowSpec} validates the spec, {@link
 * org.tserve.wlm.workflow.WorkflowRegistry} registers every node as a model of the {@link
 * org.tserve.wlm.ModelManager} (function nodes as handler-only models of the extracted archive),
 * and {@link org.tserve.wlm.workflow.WorkflowExecutor} runs one request through the DAG as
 * ordinary jobs, so queues, batching, metrics and worker restarts apply to every node.
 */
package org.tserve.wlm.workflow;

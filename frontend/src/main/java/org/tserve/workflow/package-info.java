/**
 * Workflows (TorchServe's .war): a DAG of models and Python functions served as one endpoint.
 * {@link org.tserve.workflow.WorkflowSpec} validates the spec, {@link
 * org.tserve.workflow.WorkflowRegistry} registers every node as a model of the {@link
 * org.tserve.wlm.ModelManager} (function nodes as handler-only models of the extracted archive),
 * and {@link org.tserve.workflow.WorkflowExecutor} runs one request through the DAG as
 * ordinary jobs, so queues, batching, metrics and worker restarts apply to every node.
 *
 * <p>A client of the workload manager, above it: it uses only the {@code ModelManager} facade and {@code
 * wlm.api}, as the front ends do; the REST front end serves its routes ({@code http.WorkflowApi}).
 */
package org.tserve.workflow;

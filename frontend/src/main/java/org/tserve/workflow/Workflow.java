package org.tserve.workflow;

import org.tserve.archive.WorkflowArchive;

/**
 * A registered workflow: its archive, its validated spec, and when it was registered. Each node
 * runs as the model {@code <workflow>__<node>} (TorchServe's naming).
 */
public record Workflow(String name, WorkflowArchive archive, WorkflowSpec spec, long registeredAtMillis) {
    /** The registered model that runs {@code node}. */
    public String modelName(String node) {
        return modelName(name, node);
    }

    static String modelName(String workflow, String node) {
        return workflow + "__" + node;
    }
}

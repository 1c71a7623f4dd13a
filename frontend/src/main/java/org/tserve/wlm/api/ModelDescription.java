package org.tserve.wlm.api;

import java.util.List;
import org.tserve.config.ModelSettings;

/** One model version as the describe API shows it (TorchServe's describe fields). */
public record ModelDescription(String modelName, String modelVersion, String modelUrl, String runtime,
                               boolean isDefault, ModelSettings settings, boolean loadedAtStartup,
                               List<WorkerDescription> workers, int queueRemainingCapacity, int queuePending) {
}

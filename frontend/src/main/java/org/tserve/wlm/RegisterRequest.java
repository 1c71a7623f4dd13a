package org.tserve.wlm;

/**
 * Parameters of a model registration (management API or startup). Null fields are "not given"
 * and fall back to model-config.yaml, then config.properties.
 */
public final class RegisterRequest {
    /** Archive name in the model store, local path, or allowed URL (required). */
    public String url;
    public String modelName;
    public String handler;
    public String runtime;
    public Integer batchSize;
    public Integer maxBatchDelay;
    public Integer initialWorkers;
    /** Only from a model_snapshot (the management API sets it with a scale call). */
    public Integer maxWorkers;
    public Integer responseTimeout;
    public Integer startupTimeout;
    public Integer preprocessWorkers;
    public Boolean postprocessInPool;
    /** {@code eager}, {@code adaptive} or {@code delay} (see docs/batching.md). */
    public String dispatchPolicy;
    /** Wait for the workers to load before answering (TorchServe's REST default: true). */
    public boolean synchronous = true;
    /** Set for models loaded at server startup (describe's loadedAtStartup). */
    public boolean loadedAtStartup;
    /**
     * A folder the server prepared as this model's files (a workflow's function nodes share the
     * extracted .war): used as is instead of looking {@code url} up; {@code url} is then only shown.
     */
    public java.nio.file.Path archiveDir;

    public RegisterRequest(String url) {
        this.url = url;
    }
}

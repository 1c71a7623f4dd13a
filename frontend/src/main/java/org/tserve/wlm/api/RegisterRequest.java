package org.tserve.wlm.api;

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
    /**
     * Model settings given with the registration, by model-config.yaml key ({@code batchSize} → 8), as
     * raw layer values that {@code ModelKeys} reads and checks like model-config.yaml's; the management
     * API fills it from {@code ModelKeys.apiKeys()}. The top layer of the settings.
     */
    public final java.util.Map<String, Object> settings = new java.util.LinkedHashMap<>();
    /** {@code initial_workers}: minWorkers, and maxWorkers at least as many. */
    public Integer initialWorkers;
    /** Only from a model_snapshot (the management API sets it with a scale call). */
    public Integer maxWorkers;
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

    /** Gives model setting {@code key} (a model-config.yaml name) unless {@code value} is null (not given). */
    public RegisterRequest setting(String key, Object value) {
        if (value != null) {
            settings.put(key, value);
        }
        return this;
    }
}

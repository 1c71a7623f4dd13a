package org.tserve;

import java.io.File;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.logging.log4j.Logger;
import org.tserve.archive.ModelArchive;
import org.tserve.config.Compatibility;
import org.tserve.config.ConfigException;
import org.tserve.config.ModelSnapshot;
import org.tserve.util.Logging;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.StatusResult;
import org.tserve.wlm.api.WlmException;

/**
 * Starts the models a {@code model_snapshot} names (a restored config snapshot, or KServe's
 * config.properties): every version with its workers, batch size, delay and timeouts, then each
 * model's default version. As in TorchServe, every archive must be in the model store before
 * anything loads; a version that fails to load is logged and the others still start.
 */
final class ModelSnapshotLoader {
    private static final Logger LOG = Logging.logger(ModelSnapshotLoader.class);

    private final ModelManager models;
    private final String store;

    ModelSnapshotLoader(ModelManager models, String store) {
        this.models = models;
        this.store = store;
    }

    /**
     * @return the number of model versions that loaded
     * @throws ConfigException naming the entry whose archive is missing
     */
    int load(ModelSnapshot snapshot) {
        for (ModelSnapshot.Version v : snapshot.versions()) {
            checkArchive(v);
        }
        int loaded = 0;
        Map<String, String> defaults = new LinkedHashMap<>();
        for (ModelSnapshot.Version v : snapshot.versions()) {
            String registered = register(v);
            if (registered != null) {
                loaded++;
                if (v.isDefault()) {
                    defaults.put(v.model(), registered);
                }
            }
        }
        for (Map.Entry<String, String> d : defaults.entrySet()) {
            try {
                models.setDefault(d.getKey(), d.getValue());
            } catch (WlmException e) {
                LOG.error("Cannot make version " + d.getValue() + " the default of model " + d.getKey() + ": " + e.getMessage());
            }
        }
        return loaded;
    }

    /** Registers one version; returns the version the archive declares, or null when it failed. */
    private String register(ModelSnapshot.Version v) {
        RegisterRequest r = new RegisterRequest(v.marName());
        r.modelName = v.model();
        r.initialWorkers = v.minWorkers();
        r.maxWorkers = v.maxWorkers();
        r.setting("batchSize", v.batchSize()).setting("maxBatchDelay", v.maxBatchDelay())
                .setting("responseTimeout", v.responseTimeout()).setting("startupTimeout", v.startupTimeout());
        r.runtime = v.runtimeType();
        r.loadedAtStartup = true;
        // TorchServe lists a model whose archive is junk (its workers never load): registered without
        // waiting for them under the switch, since a failed synchronous registration is undone
        r.synchronous = !(Compatibility.current().junkArchiveReadAsEmpty() && unreadable(v));
        try {
            StatusResult res = models.register(r);
            LOG.info("Model snapshot: " + v.model() + " version " + v.version() + " from " + v.marName() + ": " + res.message());
        } catch (WlmException e) {
            LOG.error("Failed to load model: " + v.model() + " version " + v.version() + " from " + v.marName() + ": "
                    + e.getMessage());
            return null;
        }
        String actual = declaredVersion(v);
        if (!actual.equals(v.version())) {
            LOG.warn("Model snapshot: " + v.marName() + " holds version " + actual + " of " + v.model()
                    + ", not the snapshot's " + v.version() + "; it is registered as " + actual);
        }
        return actual;
    }

    /** The version the registered archive declares (its manifest wins over the snapshot's key). */
    private String declaredVersion(ModelSnapshot.Version v) {
        try {
            for (org.tserve.wlm.api.ModelDescription d : models.describe(v.model(), "all")) {
                if (d.modelUrl().equals(v.marName())) {
                    return d.modelVersion();
                }
            }
        } catch (WlmException e) {
            // unregistered meanwhile: report the snapshot's own version
        }
        return v.version();
    }

    private boolean unreadable(ModelSnapshot.Version v) {
        String mar = v.marName();
        if (mar.contains("://")) {
            return false;
        }
        File f = new File(mar);
        try {
            return ModelArchive.isUnreadable((f.isAbsolute() || store == null ? f : new File(store, mar)).toPath());
        } catch (java.io.IOException e) {
            return false;   // the registration reports the file's problem
        }
    }

    private void checkArchive(ModelSnapshot.Version v) {
        String mar = v.marName();
        if (mar.contains("://")) {
            return;   // a URL: downloaded (and checked against allowed_urls) when registered
        }
        File f = new File(mar);
        if (f.isAbsolute() ? f.exists() : store != null && new File(store, mar).exists()) {
            return;
        }
        throw new ConfigException("Configuration key 'model_snapshot': models." + v.model() + "." + v.version()
                + ".marName '" + mar + "' is not in the model store " + (store == null ? "(none configured: set "
                + "model_store or --model-store)" : store) + "; put the archive there or remove the entry");
    }
}

package org.tserve.wlm.registry;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.logging.log4j.Logger;
import org.tserve.archive.ArchiveException;
import org.tserve.archive.DependencyInstaller;
import org.tserve.archive.ModelArchive;
import org.tserve.archive.ModelLocator;
import org.tserve.config.ConfigManager;
import org.tserve.util.Logging;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.StatusResult;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.supervision.WorkerEnvironment;
import org.tserve.wlm.supervision.WorkerScaler;
import org.tserve.wlm.supervision.WorkerThread;

/** Brings model versions in (archive, dependencies, first workers) and takes them out again (queue, workers, files). */
public final class ModelRegistrar {
    // logs as ModelManager did before the split: same log lines, same --log-config level
    private static final Logger LOG = Logging.logger(ModelRegistrar.class);

    private final ConfigManager cfg;
    private final WorkerEnvironment env;
    private final Path tmpRoot;
    private final ModelLocator locator;
    private final ModelFactory factory;
    private final ModelRegistry registry;
    private final WorkerScaler scaler;

    public ModelRegistrar(ConfigManager cfg, WorkerEnvironment env, Path tmpRoot, ModelRegistry registry, WorkerScaler scaler) {
        this.cfg = cfg;
        this.env = env;
        this.tmpRoot = tmpRoot;
        this.locator = new ModelLocator(cfg.getModelStore(), cfg.allowedUrls(), cfg.getLong("max_download_size"));
        this.factory = new ModelFactory(cfg);
        this.registry = registry;
        this.scaler = scaler;
    }

    /**
     * Registers a model version and starts its minimum workers (see {@link ModelManager#register});
     * every failure after the version was added takes it out again.
     */
    public StatusResult register(RegisterRequest req) throws WlmException {
        ModelArchive archive;
        try {
            if (req.archiveDir != null) {
                archive = ModelArchive.open(req.archiveDir, tmpRoot, req.url, null);
            } else {
                ModelLocator.Located loc = locator.locate(req.url);
                archive = ModelArchive.open(loc.path, tmpRoot, req.url, loc.downloaded);
            }
        } catch (ArchiveException e) {
            throw new WlmException(e.getStatus(), e.getMessage());
        }
        Model model;
        try {
            model = factory.create(req, archive);
            registry.add(model);
        } catch (WlmException | RuntimeException e) {
            archive.delete();
            throw e;
        }
        try {
            DependencyInstaller.Options opts = new DependencyInstaller.Options(cfg.getInt("install_py_dep_timeout"),
                    cfg.getBool("install_py_dep_allow_source_builds"));
            String python = env.python;
            if (model.getSettings().useVenv) {
                LOG.info("Creating the virtual environment of model " + model.name + " (useVenv) in " + archive.getVenvDir());
                python = DependencyInstaller.createVenv(env.python, env.modelServerHome, model.name, archive, opts);
            }
            if (cfg.getBool("install_py_dep_per_model") && archive.getManifest().requirementsFile != null) {
                LOG.info("Installing Python dependencies of model " + model.name + " from " + archive.getManifest().requirementsFile
                        + (model.getSettings().useVenv ? " into its virtual environment" : ""));
                DependencyInstaller.install(python, model.name, archive, opts);
            }
        } catch (ArchiveException e) {
            removeModel(model, "registration failed");
            throw new WlmException(e.getStatus(), e.getMessage());
        }
        int n = model.getSettings().minWorkers;
        List<WorkerThread> started;
        try {
            started = scaler.addWorkers(model, n);
        } catch (WlmException e) {
            removeModel(model, "registration failed");
            throw e;
        }
        LOG.info("Model " + model.name + " version " + model.version + " registered with " + n + " initial workers");
        if (n == 0) {
            return new StatusResult(200, "Model \"" + model.name + "\" Version: " + model.version
                    + " registered with 0 initial workers. Use scale workers API to add workers for the model.");
        }
        if (!req.synchronous) {
            return new StatusResult(202, "Processing worker updates...");
        }
        try {
            scaler.awaitLoaded(started, model.getSettings());
        } catch (WlmException e) {
            removeModel(model, "its workers failed to load");
            throw new WlmException(e.getStatus(), "Failed to start workers for model " + model.name + " version: "
                    + model.version + ": " + e.getMessage());
        }
        return new StatusResult(200, "Model \"" + model.name + "\" Version: " + model.version + " registered with " + n
                + " initial workers");
    }

    /** Unregisters a version (see {@link ModelManager#unregister}). */
    public StatusResult unregister(String name, String version) throws WlmException {
        Model model = registry.remove(name, version);
        retire(model, "Model \"" + name + "\" version " + model.version
                + " was unregistered before this request was served.");
        LOG.info("Model " + name + " version " + model.version + " unregistered");
        return new StatusResult(200, "Model \"" + name + "\" unregistered");
    }

    /** Takes out a version whose registration failed. */
    private void removeModel(Model model, String why) {
        registry.discard(model);
        retire(model, "Model \"" + model.name + "\" was removed because " + why + ".");
    }

    /**
     * Unregisters every version at shutdown, the models in parallel, each bounded by
     * unregister_model_timeout (plus a margin).
     */
    public void unregisterAll() {
        List<Thread> stoppers = new ArrayList<>();
        for (Model m : registry.removeAll()) {
            Thread t = new Thread(() -> retire(m, "Server is shutting down; request not served."), "stop-" + m.name);
            t.start();
            stoppers.add(t);
        }
        for (Thread t : stoppers) {
            try {
                t.join(cfg.getInt("unregister_model_timeout") * 1000L + 5000L);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Ends a version that is no longer registered: no new jobs, queued ones answered 503,
     * workers stopped, the extracted archive deleted.
     */
    private void retire(Model model, String queuedMessage) {
        model.close();
        int n = model.failQueued(503, queuedMessage);
        if (n > 0) {
            LOG.info("Answered " + n + " queued requests of model " + model.name + " with 503");
        }
        scaler.stopAll(model);
        // jobs a stopping worker put back while draining
        model.failQueued(503, queuedMessage);
        model.getArchive().delete();
    }
}

package org.tserve.workflow;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.logging.log4j.Logger;
import org.tserve.archive.ArchiveException;
import org.tserve.archive.ModelLocator;
import org.tserve.archive.WorkflowArchive;
import org.tserve.config.ConfigManager;
import org.tserve.util.Logging;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.StatusResult;
import org.tserve.wlm.api.WlmException;

/**
 * The registered workflows. Registering opens the .war from the workflow store, validates its
 * spec, and registers every node as a model {@code <workflow>__<node>} (in parallel, each waiting
 * for its workers): model nodes from their .mar, function nodes as handler-only models of the
 * extracted archive with handler {@code <module>:<function>} (one worker, batch 1, as in
 * TorchServe). Any node failing takes the others out again. Unregistering removes the models.
 */
public final class WorkflowRegistry {
    private static final Logger LOG = Logging.logger(WorkflowRegistry.class);

    private final ModelManager models;
    private final ModelLocator locator;
    private final Path tmpRoot;
    private final Map<String, Workflow> workflows = new ConcurrentHashMap<>();
    /** Names being registered or unregistered right now (a second call for one of them gets 409). */
    private final Map<String, Boolean> busy = new ConcurrentHashMap<>();
    private final ExecutorService nodeRegistrations = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "workflow-register");
        t.setDaemon(true);
        return t;
    });

    public WorkflowRegistry(ModelManager models, ConfigManager cfg, Path tmpRoot) {
        this.models = models;
        this.locator = new ModelLocator(cfg.getWorkflowStore(), cfg.allowedUrls(), cfg.getLong("max_download_size"));
        this.tmpRoot = tmpRoot;
    }

    /**
     * Registers the workflow archive at {@code url} (a .war in the workflow store, or an allowed
     * URL) under {@code name} (null: the manifest's workflowName).
     *
     * @param responseTimeout seconds, for every node's model (null: the server's default)
     * @param startupTimeout seconds, for every node's model (null: the server's default)
     * @throws WlmException 400 bad archive or spec (naming the problem) or a node that cannot be
     *     registered, 404 archive not found, 409 name taken, 500 a node's workers failed to load
     */
    public StatusResult register(String url, String name, Integer responseTimeout, Integer startupTimeout)
            throws WlmException {
        WorkflowArchive archive = open(url, name);
        String wf = archive.getName();
        if (busy.putIfAbsent(wf, Boolean.TRUE) != null) {
            archive.delete();
            throw new WlmException(409, "Workflow " + wf + " is being registered or unregistered right now");
        }
        try {
            if (workflows.containsKey(wf)) {
                throw new WlmException(409, "Workflow " + wf + " is already registered.");
            }
            WorkflowSpec spec = WorkflowSpec.parse(archive.getSpec(), handlerSource(archive), handlerName(archive));
            registerNodes(wf, archive, spec, responseTimeout, startupTimeout);
            workflows.put(wf, new Workflow(wf, archive, spec, System.currentTimeMillis()));
        } catch (WlmException | RuntimeException e) {
            archive.delete();
            throw e;
        } finally {
            busy.remove(wf);
        }
        LOG.info("Workflow " + wf + " registered from " + url);
        return new StatusResult(200, "Workflow " + wf + " has been registered and scaled successfully.");
    }

    private WorkflowArchive open(String url, String name) throws WlmException {
        try {
            ModelLocator.Located loc = locator.locate(url);
            return WorkflowArchive.open(loc.path, tmpRoot, url, name, loc.downloaded);
        } catch (ArchiveException e) {
            String msg = e.getMessage().replace("Model not found at", "Workflow archive not found at")
                    .replace("model store", "workflow store");
            throw new WlmException(e.getStatus(), msg);
        }
    }

    private static String handlerSource(WorkflowArchive archive) throws WlmException {
        Path h = archive.getHandlerFile();
        if (h == null) {
            return null;
        }
        try {
            return new String(Files.readAllBytes(h), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new WlmException(400, "Cannot read workflow handler " + h.getFileName() + ": " + e.getMessage());
        }
    }

    private static String handlerName(WorkflowArchive archive) {
        return archive.getHandlerFile() == null ? null : archive.getHandlerFile().getFileName().toString();
    }

    /** Registers all nodes in parallel; if any fails, unregisters those that succeeded and throws. */
    private void registerNodes(String wf, WorkflowArchive archive, WorkflowSpec spec, Integer responseTimeout,
                               Integer startupTimeout) throws WlmException {
        Map<String, CompletableFuture<WlmException>> pending = new TreeMap<>();
        for (WorkflowSpec.Node node : spec.nodes().values()) {
            RegisterRequest r = request(wf, archive, node, responseTimeout, startupTimeout);
            pending.put(node.name(), CompletableFuture.supplyAsync(() -> registerNode(r, node), nodeRegistrations));
        }
        List<String> failures = new ArrayList<>();
        List<String> registered = new ArrayList<>();
        int status = 0;
        for (Map.Entry<String, CompletableFuture<WlmException>> e : pending.entrySet()) {
            WlmException failure = e.getValue().join();
            if (failure == null) {
                registered.add(Workflow.modelName(wf, e.getKey()));
            } else {
                failures.add("node " + e.getKey() + ": " + failure.getMessage());
                // a node the archive points at wrongly (missing .mar, bad handler) is a bad workflow: 400
                status = Math.max(status, failure.getStatus() == 404 ? 400 : failure.getStatus());
            }
        }
        if (failures.isEmpty()) {
            return;
        }
        for (String m : registered) {
            unregisterModel(m);
        }
        throw new WlmException(status, "Workflow " + wf + " has failed to register. Failures: " + String.join("; ", failures));
    }

    private static RegisterRequest request(String wf, WorkflowArchive archive, WorkflowSpec.Node node,
                                           Integer responseTimeout, Integer startupTimeout) {
        RegisterRequest r = new RegisterRequest(node.isFunction() ? archive.getUrl() : node.url());
        r.modelName = Workflow.modelName(wf, node.name());
        if (node.isFunction()) {
            r.archiveDir = archive.getDir();
            String module = handlerName(archive).replaceAll("\\.py$", "");
            r.handler = module + ":" + node.name();
        }
        r.setting("batchSize", node.batchSize()).setting("maxBatchDelay", node.maxBatchDelay())
                .setting("responseTimeout", responseTimeout).setting("startupTimeout", startupTimeout);
        r.initialWorkers = node.minWorkers();
        r.synchronous = true;
        return r;
    }

    /** Registers one node's model and scales it to its max-workers; the failure, or null. */
    private WlmException registerNode(RegisterRequest r, WorkflowSpec.Node node) {
        try {
            models.register(r);
            if (node.maxWorkers() > node.minWorkers()) {
                models.scale(r.modelName, null, node.minWorkers(), node.maxWorkers(), false);
            }
            return null;
        } catch (WlmException e) {
            return e;
        } catch (RuntimeException e) {
            return new WlmException(500, e.toString());
        }
    }

    private void unregisterModel(String model) {
        try {
            models.unregister(model, null);
        } catch (WlmException e) {
            LOG.warn("Workflow model " + model + " could not be unregistered: " + e.getMessage());
        }
    }

    /** Unregisters a workflow and its models. */
    public StatusResult unregister(String name) throws WlmException {
        if (busy.putIfAbsent(name, Boolean.TRUE) != null) {
            throw new WlmException(409, "Workflow " + name + " is being registered or unregistered right now");
        }
        try {
            Workflow wf = workflows.remove(name);
            if (wf == null) {
                throw notFound(name);
            }
            for (String node : wf.spec().nodes().keySet()) {
                unregisterModel(wf.modelName(node));
            }
            wf.archive().delete();
        } finally {
            busy.remove(name);
        }
        LOG.info("Workflow " + name + " unregistered");
        return new StatusResult(200, "Workflow \"" + name + "\" unregistered");
    }

    /** A registered workflow; 404 when there is none of that name. */
    public Workflow get(String name) throws WlmException {
        Workflow wf = workflows.get(name);
        if (wf == null) {
            throw notFound(name);
        }
        return wf;
    }

    /** All registered workflows, sorted by name. */
    public List<Workflow> list() {
        return new ArrayList<>(new TreeMap<>(workflows).values());
    }

    /** At shutdown (the models are stopped by the model manager): removes the extracted archives. */
    public void shutdown() {
        nodeRegistrations.shutdownNow();
        for (Workflow wf : workflows.values()) {
            wf.archive().delete();
        }
        workflows.clear();
    }

    private static WlmException notFound(String name) {
        return new WlmException(404, "Workflow not found: " + name);
    }
}

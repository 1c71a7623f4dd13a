package org.tserve.wlm.registry;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.ModelDescription;
import org.tserve.wlm.api.ModelList;
import org.tserve.wlm.api.ModelSummary;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.api.WorkerDescription;
import org.tserve.wlm.supervision.Worker;

/** Answers describe and list: registered versions with their workers' live state, and pages of model names. */
public final class ModelDescriber {
    /** How long describe waits for the workers' PONGs (stages) before showing a worker without them. */
    private static final long PONG_WAIT_MS = 2000;

    private final ModelRegistry registry;

    public ModelDescriber(ModelRegistry registry) {
        this.registry = registry;
    }

    /** See {@link ModelManager#describe}. */
    public List<ModelDescription> describe(String name, String version) throws WlmException {
        ModelRegistry.Selection sel = registry.select(name, version);
        List<ModelDescription> out = new ArrayList<>();
        // PING every worker first, then collect: the PONGs carry the pipeline stages (one wait in all)
        Map<Worker, CompletableFuture<String>> pongs = new LinkedHashMap<>();
        for (Model m : sel.models()) {
            for (Worker w : m.workers()) {
                pongs.put(w, w.ping());
            }
        }
        long pongDeadline = System.currentTimeMillis() + PONG_WAIT_MS;
        for (Model m : sel.models()) {
            List<WorkerDescription> ws = new ArrayList<>();
            for (Worker w : m.workers()) {
                ws.add(w.describe(awaitPong(pongs.get(w), pongDeadline)));
            }
            out.add(new ModelDescription(m.name, m.version, m.getArchive().getUrl(), m.runtime,
                    m.version.equals(sel.defaultVersion()), m.getSettings().copy(), m.loadedAtStartup, ws,
                    m.queue.remainingCapacity(), m.queue.size() + m.sequences.waitingCount()));
        }
        return out;
    }

    /** The PONG json, or null when the worker is not serving or did not answer by {@code deadline}. */
    private static String awaitPong(CompletableFuture<String> pong, long deadline) {
        if (pong == null) {
            return null;
        }
        try {
            return pong.get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
        } catch (TimeoutException | ExecutionException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    /** See {@link ModelManager#list}. */
    public ModelList list(int limit, int pageToken) {
        int lim = limit < 0 || limit > 100 ? 100 : limit;
        int start = Math.max(0, pageToken);
        TreeMap<String, String> sorted = new TreeMap<>();
        for (Model m : registry.defaults()) {
            sorted.put(m.name, m.getArchive().getUrl());
        }
        List<ModelList.Entry> all = new ArrayList<>();
        sorted.forEach((k, u) -> all.add(new ModelList.Entry(k, u)));
        int end = Math.min(all.size(), start + lim);
        List<ModelList.Entry> page = start >= all.size() ? List.of() : all.subList(start, end);
        String next = end < all.size() ? String.valueOf(end) : null;
        return new ModelList(Collections.unmodifiableList(new ArrayList<>(page)), next);
    }

    /** See {@link ModelManager#summaries}. */
    public List<ModelSummary> summaries() {
        TreeMap<String, ModelSummary> sorted = new TreeMap<>();
        for (Model m : registry.defaults()) {
            sorted.put(m.name, summary(m));
        }
        return new ArrayList<>(sorted.values());
    }

    /** See {@link ModelManager#summary}. */
    public ModelSummary summary(String name, String version) throws WlmException {
        return summary(registry.find(name, version));
    }

    public static ModelSummary summary(Model m) {
        return new ModelSummary(m.name, m.version, m.registeredAtMillis);
    }
}

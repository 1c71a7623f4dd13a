package org.tserve.wlm.registry;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.tserve.wlm.api.WlmException;

/** The registered model versions by name, and which version of each name is the default. */
public final class ModelRegistry {
    /** A ConcurrentHashMap so that {@link #names()} may read it without the lock. */
    private final Map<String, Versions> models = new ConcurrentHashMap<>();

    /** The versions of one model name (in registration order) and which one is the default. */
    private static final class Versions {
        final Map<String, Model> byVersion = new LinkedHashMap<>();
        String defaultVersion;
    }

    /** The versions {@link #select} picked and the name's default version at that moment. */
    record Selection(List<Model> models, String defaultVersion) {
    }

    /**
     * Adds a model version; the first version of a name becomes its default.
     *
     * @throws WlmException 409 when that version of the name is already registered
     */
    synchronized void add(Model model) throws WlmException {
        Versions v = models.computeIfAbsent(model.name, k -> new Versions());
        if (v.byVersion.containsKey(model.version)) {
            throw new WlmException(409, "Model version " + model.version + " is already registered for model "
                    + model.name);
        }
        v.byVersion.put(model.version, model);
        if (v.defaultVersion == null) {
            v.defaultVersion = model.version;
        }
    }

    /**
     * Removes a version at a client's request (null = the default one).
     *
     * @throws WlmException 404 unknown, 403 the default version while other versions exist (the
     *     client must choose the next default)
     */
    synchronized Model remove(String name, String version) throws WlmException {
        Versions v = versionsOf(name);
        String ver = version == null ? v.defaultVersion : version;
        Model model = v.byVersion.get(ver);
        if (model == null) {
            throw noSuchVersion(name, version);
        }
        if (ver.equals(v.defaultVersion) && v.byVersion.size() > 1) {
            throw new WlmException(403, "Cannot remove default version for model " + name
                    + "; set another default version first (PUT /models/" + name + "/{version}/set-default)");
        }
        v.byVersion.remove(ver);
        if (v.byVersion.isEmpty()) {
            models.remove(name);
        }
        return model;
    }

    /**
     * Takes back a version whose registration failed. Nobody chose a next default, so the oldest
     * remaining version becomes it. Does nothing when {@code model} is no longer the registered one.
     */
    synchronized void discard(Model model) {
        Versions v = models.get(model.name);
        if (v == null || v.byVersion.get(model.version) != model) {
            return;
        }
        v.byVersion.remove(model.version);
        if (model.version.equals(v.defaultVersion)) {
            v.defaultVersion = v.byVersion.isEmpty() ? null : v.byVersion.keySet().iterator().next();
        }
        if (v.byVersion.isEmpty()) {
            models.remove(model.name);
        }
    }

    /** Makes {@code version} the default version of {@code name}; 404 when either is unknown. */
    public synchronized void setDefault(String name, String version) throws WlmException {
        Versions v = versionsOf(name);
        if (!v.byVersion.containsKey(version)) {
            throw noSuchVersion(name, version);
        }
        v.defaultVersion = version;
    }

    /** A version of {@code name} (null = the default one); 404 when either is unknown. */
    public synchronized Model find(String name, String version) throws WlmException {
        Versions v = versionsOf(name);
        Model m = v.byVersion.get(version == null ? v.defaultVersion : version);
        if (m == null) {
            throw noSuchVersion(name, version);
        }
        return m;
    }

    /** As {@link #find}, and {@code "all"} selects every version; with the default read under the same lock. */
    synchronized Selection select(String name, String version) throws WlmException {
        Versions v = versionsOf(name);
        if ("all".equals(version)) {
            return new Selection(new ArrayList<>(v.byVersion.values()), v.defaultVersion);
        }
        Model m = v.byVersion.get(version == null ? v.defaultVersion : version);
        if (m == null) {
            throw noSuchVersion(name, version);
        }
        return new Selection(List.of(m), v.defaultVersion);
    }

    /** The default version of every name, in no particular order. */
    public synchronized List<Model> defaults() {
        List<Model> out = new ArrayList<>();
        for (Versions v : models.values()) {
            Model m = v.byVersion.get(v.defaultVersion);
            if (m != null) {
                out.add(m);
            }
        }
        return out;
    }

    /** Names of all registered models (sorted). */
    public List<String> names() {
        return new ArrayList<>(new TreeMap<>(models).keySet());
    }

    /** Empties the registry (shutdown) and returns every version it held. */
    synchronized List<Model> removeAll() {
        List<Model> all = new ArrayList<>();
        for (Versions v : models.values()) {
            all.addAll(v.byVersion.values());
        }
        models.clear();
        return all;
    }

    private Versions versionsOf(String name) throws WlmException {
        Versions v = models.get(name);
        if (v == null) {
            throw new WlmException(404, "Model not found: " + name);
        }
        return v;
    }

    private static WlmException noSuchVersion(String name, String version) {
        return new WlmException(404, "Model version: " + version + " does not exist for model: " + name);
    }
}

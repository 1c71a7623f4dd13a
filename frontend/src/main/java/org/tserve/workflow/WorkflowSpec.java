package org.tserve.workflow;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import org.tserve.wlm.api.WlmException;

/**
 * A workflow's spec YAML, validated: {@code models:} (global settings, then one entry with a
 * {@code url} per model, whose own settings override the global ones) and {@code dag:} (node →
 * list of the nodes it feeds). A DAG node that is not a model is a function of the workflow's
 * handler file. Every problem is a WlmException(400) naming it.
 */
public final class WorkflowSpec {
    /** How one node runs: a model's .mar url, or null for a handler function; its scaling, batching and retries. */
    public record Node(String name, String url, int minWorkers, int maxWorkers, int batchSize, int maxBatchDelay,
                       int retryAttempts, int timeoutMs) {
        public boolean isFunction() {
            return url == null;
        }
    }

    static final List<String> SETTINGS = List.of("min-workers", "max-workers", "batch-size", "max-batch-delay",
            "retry-attempts", "timeout-ms");
    /** TorchServe's defaults, in SETTINGS order. */
    private static final int[] DEFAULTS = {1, 1, 1, 50, 1, 10000};

    private final Map<String, Node> nodes;
    private final Map<String, List<String>> children;
    private final Map<String, List<String>> parents;
    private final Map<String, Integer> globals;

    private WorkflowSpec(Map<String, Node> nodes, Map<String, List<String>> children, Map<String, List<String>> parents,
                         Map<String, Integer> globals) {
        this.nodes = nodes;
        this.children = children;
        this.parents = parents;
        this.globals = globals;
    }

    /**
     * @param handlerSource the workflow handler's Python source, or null when the archive has none
     * @param handlerName its file name, for messages
     */
    public static WorkflowSpec parse(Map<String, Object> yaml, String handlerSource, String handlerName) throws WlmException {
        Map<String, Integer> globals = new LinkedHashMap<>();
        for (int i = 0; i < SETTINGS.size(); i++) {
            globals.put(SETTINGS.get(i), DEFAULTS[i]);
        }
        Map<String, Map<?, ?>> modelEntries = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : mapping(yaml.get("models"), "models", true).entrySet()) {
            if (SETTINGS.contains(e.getKey())) {
                globals.put(e.getKey(), setting(e.getValue(), "models: " + e.getKey()));
            } else if (e.getValue() instanceof Map) {
                modelEntries.put(e.getKey(), (Map<?, ?>) e.getValue());
            } else {
                throw bad("models: key '" + e.getKey() + "' is neither a setting " + SETTINGS
                        + " nor a model entry (a mapping with its url)");
            }
        }
        Map<String, List<String>> children = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : mapping(yaml.get("dag"), "dag", false).entrySet()) {
            children.computeIfAbsent(e.getKey(), k -> new ArrayList<>()).addAll(targets(e.getKey(), e.getValue()));
        }
        Map<String, List<String>> parents = new LinkedHashMap<>();
        for (String n : new ArrayList<>(children.keySet())) {
            parents.putIfAbsent(n, new ArrayList<>());
            for (String c : children.get(n)) {
                children.putIfAbsent(c, new ArrayList<>());
                parents.computeIfAbsent(c, k -> new ArrayList<>()).add(n);
            }
        }
        Map<String, Node> nodes = new LinkedHashMap<>();
        List<String> missing = new ArrayList<>();
        for (String n : children.keySet()) {
            Map<?, ?> model = modelEntries.get(n);
            if (model != null) {
                nodes.put(n, modelNode(n, model, globals));
            } else if (handlerSource != null && defines(handlerSource, n)) {
                nodes.put(n, new Node(n, null, 1, 1, 1, 0, globals.get("retry-attempts"), globals.get("timeout-ms")));
            } else {
                missing.add(n);
            }
        }
        if (!missing.isEmpty()) {
            throw bad("dag nodes " + missing + " are neither models (entries under models: with a url) nor functions in "
                    + (handlerSource == null ? "a workflow handler (the archive has none: build it with --handler)"
                    : "the workflow handler " + handlerName + " (define def <node>(data, context) there)"));
        }
        checkAcyclic(children, parents);
        return new WorkflowSpec(Collections.unmodifiableMap(nodes), children, parents, globals);
    }

    private static Node modelNode(String name, Map<?, ?> entry, Map<String, Integer> globals) throws WlmException {
        Map<String, Integer> s = new HashMap<>(globals);
        Object url = null;
        for (Map.Entry<?, ?> e : entry.entrySet()) {
            String key = String.valueOf(e.getKey());
            if (key.equals("url")) {
                url = e.getValue();
            } else if (SETTINGS.contains(key)) {
                s.put(key, setting(e.getValue(), "models: " + name + ": " + key));
            } else {
                throw bad("models: " + name + ": unknown key '" + key + "' (use url and " + SETTINGS + ")");
            }
        }
        if (!(url instanceof String) || ((String) url).isBlank()) {
            throw bad("models: " + name + " needs a url: the .mar file in the model store (or an allowed URL)");
        }
        if (s.get("max-workers") < s.get("min-workers")) {
            throw bad("models: " + name + ": max-workers " + s.get("max-workers") + " is below min-workers "
                    + s.get("min-workers"));
        }
        return new Node(name, (String) url, s.get("min-workers"), s.get("max-workers"), s.get("batch-size"),
                s.get("max-batch-delay"), s.get("retry-attempts"), s.get("timeout-ms"));
    }

    private static int setting(Object v, String where) throws WlmException {
        int min = where.endsWith("max-batch-delay") || where.endsWith("retry-attempts") ? 0 : 1;
        if (!(v instanceof Integer) || (Integer) v < min) {
            throw bad(where + " must be an integer of at least " + min + ", got '" + v + "'");
        }
        return (Integer) v;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> mapping(Object o, String section, boolean optional) throws WlmException {
        if (o == null && optional) {
            return Map.of();
        }
        if (!(o instanceof Map) || (!optional && ((Map<?, ?>) o).isEmpty())) {
            throw bad("the spec needs a '" + section + ":' mapping"
                    + (section.equals("dag") ? " of node: [next nodes], e.g. dag: {pre: [m1], m1: [post]}" : ""));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        ((Map<Object, Object>) o).forEach((k, v) -> out.put(String.valueOf(k), v));
        return out;
    }

    private static List<String> targets(String node, Object v) throws WlmException {
        List<String> out = new ArrayList<>();
        if (v == null) {
            return out;
        }
        if (!(v instanceof List)) {
            throw bad("dag: " + node + " must map to a list of node names, e.g. " + node + ": [next], got '" + v + "'");
        }
        for (Object t : (List<?>) v) {
            if (t == null || String.valueOf(t).isBlank()) {
                continue;
            }
            if (String.valueOf(t).equals(node)) {
                throw bad("dag has a cycle: " + node + " -> " + node);
            }
            out.add(String.valueOf(t));
        }
        return out;
    }

    /** Whether the Python source defines {@code name} at module level (a def, or an assignment). */
    static boolean defines(String source, String name) {
        String n = Pattern.quote(name);
        return Pattern.compile("(?m)^(async\\s+)?def\\s+" + n + "\\s*\\(|^" + n + "\\s*=[^=]").matcher(source).find();
    }

    /** Kahn's algorithm; what remains holds a cycle, which is found by walking back through remaining parents. */
    private static void checkAcyclic(Map<String, List<String>> children, Map<String, List<String>> parents)
            throws WlmException {
        Map<String, Integer> indegree = new HashMap<>();
        Deque<String> ready = new ArrayDeque<>();
        for (String n : children.keySet()) {
            indegree.put(n, parents.get(n).size());
            if (parents.get(n).isEmpty()) {
                ready.add(n);
            }
        }
        while (!ready.isEmpty()) {
            for (String c : children.get(ready.poll())) {
                if (indegree.merge(c, -1, Integer::sum) == 0) {
                    ready.add(c);
                }
            }
        }
        String start = indegree.entrySet().stream().filter(e -> e.getValue() > 0).map(Map.Entry::getKey).findFirst()
                .orElse(null);
        if (start == null) {
            return;
        }
        LinkedHashSet<String> walk = new LinkedHashSet<>();
        String n = start;
        while (walk.add(n)) {
            n = parents.get(n).stream().filter(p -> indegree.get(p) > 0).findFirst().orElseThrow();
        }
        List<String> cycle = new ArrayList<>();
        boolean in = false;
        for (String w : walk) {
            in = in || w.equals(n);
            if (in) {
                cycle.add(0, w);   // the walk went against the edges
            }
        }
        cycle.add(cycle.get(0));
        throw bad("dag has a cycle: " + String.join(" -> ", cycle) + " (a workflow must be a DAG)");
    }

    private static WlmException bad(String message) {
        return new WlmException(400, "Invalid workflow specification: " + message);
    }

    /** Every node by name (dag order). */
    public Map<String, Node> nodes() {
        return nodes;
    }

    /** The nodes {@code node} feeds. */
    public List<String> children(String node) {
        return children.get(node);
    }

    /** The nodes that feed {@code node}. */
    public List<String> parents(String node) {
        return parents.get(node);
    }

    /** The global settings (defaults filled in), for describe. */
    public int global(String setting) {
        return globals.get(setting);
    }

    /** The dag as a mapping node → next nodes, for describe. */
    public Map<String, List<String>> dag() {
        return Collections.unmodifiableMap(children);
    }
}

package org.tserve;

import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import com.tngtech.archunit.core.domain.Dependency;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.junit.Test;

/**
 * The frontend's package layers, checked on the compiled classes (ArchUnit): no package cycle
 * anywhere in {@code org.tserve}, and the workload manager a one-way stack that the front ends
 * enter only through its facade ({@code wlm.ModelManager}) and its API types ({@code wlm.api}).
 * docs/architecture.md draws the same table. A new dependency that breaks a rule fails here,
 * naming the classes; the package graph is written to {@code frontend/build/package-graph.txt}.
 */
public class LayeringTest {
    private static final JavaClasses CLASSES = new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("org.tserve");

    /**
     * wlm, bottom to top: api ← protocol ← link ← batching ← supervision ← sequences ← registry ←
     * multinode ← the facade. Each room names who may use it; nobody else may.
     */
    @Test
    public void wlmIsAOneWayStackEnteredThroughItsFacade() {
        layeredArchitecture().consideringOnlyDependenciesInLayers()
                .layer("wlm.api").definedBy("org.tserve.wlm.api..")
                .layer("wlm.protocol").definedBy("org.tserve.wlm.protocol..")
                .layer("wlm.link").definedBy("org.tserve.wlm.link..")
                .layer("wlm.batching").definedBy("org.tserve.wlm.batching..")
                .layer("wlm.supervision").definedBy("org.tserve.wlm.supervision..")
                .layer("wlm.sequences").definedBy("org.tserve.wlm.sequences..")
                .layer("wlm.registry").definedBy("org.tserve.wlm.registry..")
                .layer("wlm.multinode").definedBy("org.tserve.wlm.multinode..")
                .layer("wlm (facade)").definedBy("org.tserve.wlm")
                .layer("workflow").definedBy("org.tserve.workflow..")
                .layer("server").definedBy("org.tserve.server..")
                .layer("http").definedBy("org.tserve.http..")
                .layer("grpc").definedBy("org.tserve.grpc..")
                .layer("metrics").definedBy("org.tserve.metrics..")
                .layer("api (json)").definedBy("org.tserve.api..")
                .layer("main").definedBy("org.tserve")
                .whereLayer("wlm.protocol").mayOnlyBeAccessedByLayers("wlm.link", "wlm.batching", "wlm.supervision",
                        "wlm.sequences")
                .whereLayer("wlm.link").mayOnlyBeAccessedByLayers("wlm.batching", "wlm.supervision", "wlm.sequences")
                .whereLayer("wlm.batching").mayOnlyBeAccessedByLayers("wlm.supervision")
                .whereLayer("wlm.supervision").mayOnlyBeAccessedByLayers("wlm.sequences", "wlm.registry",
                        "wlm.multinode", "wlm (facade)", "main")   // main: the worker environment and the zygote
                .whereLayer("wlm.sequences").mayOnlyBeAccessedByLayers("wlm.registry")
                .whereLayer("wlm.registry").mayOnlyBeAccessedByLayers("wlm.multinode", "wlm (facade)")
                .whereLayer("wlm.multinode").mayOnlyBeAccessedByLayers("wlm (facade)")
                .whereLayer("wlm (facade)").mayOnlyBeAccessedByLayers("workflow", "server", "http", "grpc", "metrics",
                        "main")
                .whereLayer("workflow").mayOnlyBeAccessedByLayers("http")
                .whereLayer("server").mayOnlyBeAccessedByLayers("http", "grpc", "metrics", "main")
                .whereLayer("http").mayOnlyBeAccessedByLayers("main")
                .whereLayer("grpc").mayNotBeAccessedByAnyLayer()
                .whereLayer("metrics").mayNotBeAccessedByAnyLayer()
                .whereLayer("main").mayNotBeAccessedByAnyLayer()
                .check(CLASSES);
    }

    @Test
    public void noPackageCycle() {
        Map<String, Set<String>> graph = packageGraph();
        List<List<String>> cycles = cycles(graph);
        assertTrue("package cycles (each a set of packages that import each other in a circle): " + cycles
                + "\n" + describe(graph), cycles.isEmpty());
    }

    /** The checker itself: a cycle it is shown is found. */
    @Test
    public void aCycleIsFound() {
        Map<String, Set<String>> g = new TreeMap<>();
        g.put("a", new TreeSet<>(List.of("b")));
        g.put("b", new TreeSet<>(List.of("c")));
        g.put("c", new TreeSet<>(List.of("a")));
        g.put("d", new TreeSet<>(List.of("a")));
        assertEquals(List.of(List.of("a", "b", "c")), cycles(g));
    }

    /** Package → the org.tserve packages its classes use (itself left out), from the compiled classes. */
    static Map<String, Set<String>> packageGraph() {
        Map<String, Set<String>> graph = new TreeMap<>();
        for (JavaClass c : CLASSES) {
            Set<String> out = graph.computeIfAbsent(c.getPackageName(), k -> new TreeSet<>());
            for (Dependency d : c.getDirectDependenciesFromSelf()) {
                String to = d.getTargetClass().getPackageName();
                if (to.startsWith("org.tserve") && !to.equals(c.getPackageName())) {
                    out.add(to);
                }
            }
        }
        return graph;
    }

    static String describe(Map<String, Set<String>> graph) {
        StringBuilder b = new StringBuilder();
        graph.forEach((p, to) -> b.append(p).append(" -> ").append(String.join(", ", to)).append('\n'));
        return b.toString();
    }

    /** The strongly connected components of more than one package (Tarjan), each sorted. */
    static List<List<String>> cycles(Map<String, Set<String>> graph) {
        Map<String, Integer> index = new HashMap<>();
        Map<String, Integer> low = new HashMap<>();
        Deque<String> stack = new ArrayDeque<>();
        Set<String> onStack = new TreeSet<>();
        List<List<String>> out = new ArrayList<>();
        for (String p : graph.keySet()) {
            if (!index.containsKey(p)) {
                connect(p, graph, index, low, stack, onStack, out);
            }
        }
        return out;
    }

    private static void connect(String p, Map<String, Set<String>> graph, Map<String, Integer> index,
                                Map<String, Integer> low, Deque<String> stack, Set<String> onStack,
                                List<List<String>> out) {
        index.put(p, index.size());
        low.put(p, index.get(p));
        stack.push(p);
        onStack.add(p);
        for (String q : graph.getOrDefault(p, Set.of())) {
            if (!index.containsKey(q)) {
                connect(q, graph, index, low, stack, onStack, out);
                low.put(p, Math.min(low.get(p), low.get(q)));
            } else if (onStack.contains(q)) {
                low.put(p, Math.min(low.get(p), index.get(q)));
            }
        }
        if (low.get(p).equals(index.get(p))) {
            List<String> component = new ArrayList<>();
            String q;
            do {
                q = stack.pop();
                onStack.remove(q);
                component.add(q);
            } while (!q.equals(p));
            if (component.size() > 1) {
                component.sort(null);
                out.add(component);
            }
        }
    }

    /** Writes the package graph to build/package-graph.txt (for reviews and docs/architecture.md). */
    @Test
    public void writesThePackageGraph() throws java.io.IOException {
        Map<String, Set<String>> graph = packageGraph();
        assertTrue("the wlm facade is among the packages", graph.containsKey("org.tserve.wlm"));
        java.nio.file.Path out = java.nio.file.Path.of("build", "package-graph.txt");
        java.nio.file.Files.createDirectories(out.getParent());
        java.nio.file.Files.writeString(out, "# org.tserve: package -> the org.tserve packages it uses (LayeringTest)\n"
                + describe(graph));
    }
}

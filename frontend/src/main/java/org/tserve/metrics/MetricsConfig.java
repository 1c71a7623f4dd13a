package org.tserve.metrics;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import org.yaml.snakeyaml.error.YAMLException;

/**
 * A parsed metrics.yaml (TorchServe's schema): {@code dimensions:} (anchors only),
 * {@code ts_metrics:} (frontend) and {@code model_metrics:} (handlers), each with optional
 * {@code counter:}, {@code gauge:} and {@code histogram:} lists of {@code {name, unit, dimensions}}.
 */
public final class MetricsConfig {
    private final Map<String, MetricSpec> tsMetrics;
    private final Map<String, MetricSpec> modelMetrics;

    private MetricsConfig(Map<String, MetricSpec> tsMetrics, Map<String, MetricSpec> modelMetrics) {
        this.tsMetrics = Collections.unmodifiableMap(tsMetrics);
        this.modelMetrics = Collections.unmodifiableMap(modelMetrics);
    }

    /** Frontend metrics by name, in file order. */
    public Map<String, MetricSpec> tsMetrics() {
        return tsMetrics;
    }

    /** Handler (backend) metrics by name, in file order. */
    public Map<String, MetricSpec> modelMetrics() {
        return modelMetrics;
    }

    /** Reads and validates a metrics.yaml file. */
    public static MetricsConfig load(Path file) {
        String text;
        try {
            text = new String(Files.readAllBytes(file), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new MetricsConfigException("Cannot read metrics config " + file + " (metrics_config): " + e.getMessage());
        }
        return parse(text, file.toString());
    }

    /** Parses metrics.yaml text; {@code source} names it in error messages. */
    public static MetricsConfig parse(String text, String source) {
        Object root;
        try {
            root = new Yaml(new SafeConstructor(new LoaderOptions())).load(text);
        } catch (YAMLException e) {
            throw new MetricsConfigException("Metrics config " + source + " is not valid YAML: "
                    + e.getMessage().replace('\n', ' '));
        }
        if (root == null) {
            root = new LinkedHashMap<String, Object>();
        }
        if (!(root instanceof Map)) {
            throw new MetricsConfigException("Metrics config " + source
                    + " must be a mapping with ts_metrics and model_metrics sections");
        }
        Map<?, ?> map = (Map<?, ?>) root;
        return new MetricsConfig(section(map, "ts_metrics", source), section(map, "model_metrics", source));
    }

    private static Map<String, MetricSpec> section(Map<?, ?> root, String key, String source) {
        Map<String, MetricSpec> out = new LinkedHashMap<>();
        Object sec = root.get(key);
        if (sec == null) {
            return out;
        }
        if (!(sec instanceof Map)) {
            throw new MetricsConfigException("Metrics config " + source + ": '" + key
                    + "' must be a mapping of counter/gauge/histogram lists");
        }
        for (Map.Entry<?, ?> e : ((Map<?, ?>) sec).entrySet()) {
            String typeName = String.valueOf(e.getKey());
            MetricType type = MetricType.parse(typeName);
            if (type == null) {
                throw new MetricsConfigException("Metrics config " + source + ": unknown metric type '" + typeName
                        + "' in " + key + " (use counter, gauge or histogram)");
            }
            if (e.getValue() == null) {
                continue;
            }
            if (!(e.getValue() instanceof List)) {
                throw new MetricsConfigException("Metrics config " + source + ": " + key + "." + typeName
                        + " must be a list of {name, unit, dimensions}");
            }
            for (Object item : (List<?>) e.getValue()) {
                MetricSpec spec = spec(item, key + "." + typeName, type, source);
                if (out.containsKey(spec.name)) {
                    throw new MetricsConfigException("Metrics config " + source + ": metric '" + spec.name
                            + "' is declared twice in " + key + "; keep one declaration");
                }
                out.put(spec.name, spec);
            }
        }
        return out;
    }

    private static MetricSpec spec(Object item, String where, MetricType type, String source) {
        if (!(item instanceof Map)) {
            throw new MetricsConfigException("Metrics config " + source + ": entry " + item + " in " + where
                    + " must be a mapping with name, unit and dimensions");
        }
        Map<?, ?> m = (Map<?, ?>) item;
        Object name = m.get("name");
        if (name == null || String.valueOf(name).trim().isEmpty()) {
            throw new MetricsConfigException("Metrics config " + source + ": an entry in " + where + " has no name");
        }
        String n = String.valueOf(name).trim();
        Object unit = m.get("unit");
        List<String> dims = new ArrayList<>();
        Object d = m.get("dimensions");
        if (d != null) {
            if (!(d instanceof List)) {
                throw new MetricsConfigException("Metrics config " + source + ": dimensions of metric '" + n
                        + "' in " + where + " must be a list of names");
            }
            for (Object o : (List<?>) d) {
                String dn = String.valueOf(o).trim();
                if (dn.isEmpty() || dims.contains(dn)) {
                    throw new MetricsConfigException("Metrics config " + source + ": metric '" + n
                            + "' has an empty or repeated dimension '" + dn + "'");
                }
                dims.add(dn);
            }
        }
        double[] buckets = null;
        Object b = m.get("buckets");
        if (b != null) {
            buckets = buckets(b, n, source);
        }
        return new MetricSpec(n, unit == null ? "" : String.valueOf(unit), type, dims, buckets);
    }

    private static double[] buckets(Object b, String name, String source) {
        if (!(b instanceof List) || ((List<?>) b).isEmpty()) {
            throw new MetricsConfigException("Metrics config " + source + ": buckets of metric '" + name
                    + "' must be a non-empty list of ascending numbers");
        }
        List<?> l = (List<?>) b;
        double[] out = new double[l.size()];
        for (int i = 0; i < out.length; i++) {
            Object o = l.get(i);
            if (!(o instanceof Number) || (i > 0 && ((Number) o).doubleValue() <= out[i - 1])) {
                throw new MetricsConfigException("Metrics config " + source + ": buckets of metric '" + name
                        + "' must be a non-empty list of ascending numbers, got " + l);
            }
            out[i] = ((Number) o).doubleValue();
        }
        return out;
    }
}

package org.tserve.metrics;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Prometheus text exposition format 0.0.4, as TorchServe's Prometheus client writes it: a HELP
 * and a TYPE line per family, one sample line per series (labels end with a comma), histograms as
 * {@code _bucket{le=..}}, {@code _count} and {@code _sum}.
 *
 * <p>Why by hand when client_java is on the classpath ({@link ClientJavaExposition} writes the
 * OpenMetrics and protobuf answers): this is the default answer of {@code /metrics}, and TorchServe
 * 0.12's own test ({@code test_metrics.py::test_metrics_prometheus_mode}) and its users' parsers read it
 * byte for byte as TorchServe's old simpleclient wrote it. client_java 1.x's {@code PrometheusTextFormatWriter}
 * writes it differently: a counter named {@code Requests2XX} becomes {@code Requests2XX_total} in its
 * HELP, TYPE and sample lines, label sets lose the trailing comma ({@code {Level="Host",Hostname="h"}}),
 * and families come sorted by name instead of in metrics.yaml's order. None of that can be configured,
 * so the answer could not stay byte-identical through it.
 */
public final class PrometheusWriter {
    /** The Content-Type of the exposition. */
    public static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

    private PrometheusWriter() {
    }

    /**
     * Writes the families; a non-empty {@code names} keeps only families whose name, or the name
     * of one of their samples ({@code x_bucket}, {@code x_count}, {@code x_sum}), is listed.
     */
    public static String write(Collection<MetricFamily> families, Set<String> names) {
        StringBuilder sb = new StringBuilder();
        for (MetricFamily f : families) {
            if (!selected(f, names)) {
                continue;
            }
            writeFamily(sb, f);
        }
        return sb.toString();
    }

    /** Whether a {@code name[]} selection lists this family (see {@link #write}); an empty one lists all. */
    static boolean selected(MetricFamily f, Set<String> names) {
        if (names == null || names.isEmpty()) {
            return true;
        }
        String n = sanitizeName(f.spec().name);
        if (names.contains(n) || names.contains(f.spec().name)) {
            return true;
        }
        return f.spec().type == MetricType.HISTOGRAM
                && (names.contains(n + "_bucket") || names.contains(n + "_count") || names.contains(n + "_sum"));
    }

    static void writeFamily(StringBuilder sb, MetricFamily f) {
        MetricSpec spec = f.spec();
        String name = sanitizeName(spec.name);
        sb.append("# HELP ").append(name).append(' ').append(escapeHelp(help(spec))).append('\n');
        sb.append("# TYPE ").append(name).append(' ').append(spec.type.wireName()).append('\n');
        List<String> labels = new ArrayList<>();
        for (String l : f.labelNames()) {
            labels.add(sanitizeLabel(l));
        }
        Map<List<String>, MetricFamily.Series.Snapshot> snap = f.snapshot();
        List<List<String>> keys = new ArrayList<>(snap.keySet());
        keys.sort(PrometheusWriter::compareLists);
        for (List<String> values : keys) {
            MetricFamily.Series.Snapshot s = snap.get(values);
            if (spec.type != MetricType.HISTOGRAM) {
                sample(sb, name, labels, values, null, null, s.value);
                continue;
            }
            for (int i = 0; i < s.bounds.length; i++) {
                sample(sb, name + "_bucket", labels, values, "le", formatValue(s.bounds[i]), s.cumulativeCounts[i]);
            }
            sample(sb, name + "_bucket", labels, values, "le", "+Inf", s.count);
            sample(sb, name + "_count", labels, values, null, null, s.count);
            sample(sb, name + "_sum", labels, values, null, null, s.value);
        }
    }

    /** TorchServe's HELP text of a family (unescaped). */
    static String help(MetricSpec spec) {
        return "Torchserve prometheus " + spec.type.wireName() + " metric with unit: " + spec.unit;
    }

    private static int compareLists(List<String> a, List<String> b) {
        for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
            int c = a.get(i).compareTo(b.get(i));
            if (c != 0) {
                return c;
            }
        }
        return Integer.compare(a.size(), b.size());
    }

    private static void sample(StringBuilder sb, String name, List<String> labels, List<String> values,
                               String extraLabel, String extraValue, double v) {
        sb.append(name);
        if (!labels.isEmpty() || extraLabel != null) {
            sb.append('{');
            for (int i = 0; i < labels.size(); i++) {
                sb.append(labels.get(i)).append("=\"").append(escapeLabelValue(values.get(i))).append("\",");
            }
            if (extraLabel != null) {
                sb.append(extraLabel).append("=\"").append(extraValue).append("\",");
            }
            sb.append('}');
        }
        sb.append(' ').append(formatValue(v)).append('\n');
    }

    /** Go-style number text: {@code +Inf}, {@code -Inf}, {@code NaN}, else Java's double text ({@code 8.0}). */
    public static String formatValue(double v) {
        if (v == Double.POSITIVE_INFINITY) {
            return "+Inf";
        }
        if (v == Double.NEGATIVE_INFINITY) {
            return "-Inf";
        }
        if (Double.isNaN(v)) {
            return "NaN";
        }
        return Double.toString(v);
    }

    /** Label values escape backslash, double quote and newline. */
    public static String escapeLabelValue(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '\\':
                    sb.append("\\\\");
                    break;
                case '"':
                    sb.append("\\\"");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                default:
                    sb.append(c);
            }
        }
        return sb.toString();
    }

    /** HELP text escapes backslash and newline. */
    public static String escapeHelp(String s) {
        return s.replace("\\", "\\\\").replace("\n", "\\n");
    }

    /** Metric names must match {@code [a-zA-Z_:][a-zA-Z0-9_:]*}; other characters become '_'. */
    public static String sanitizeName(String s) {
        return sanitize(s, true);
    }

    /** Label names must match {@code [a-zA-Z_][a-zA-Z0-9_]*}; other characters become '_'. */
    public static String sanitizeLabel(String s) {
        return sanitize(s, false);
    }

    private static String sanitize(String s, boolean colonOk) {
        StringBuilder sb = new StringBuilder(s.length() + 1);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colonOk && c == ':')
                    || (i > 0 && c >= '0' && c <= '9');
            if (!ok && i == 0 && c >= '0' && c <= '9') {
                sb.append('_').append(c);
                continue;
            }
            sb.append(ok ? c : '_');
        }
        return sb.length() == 0 ? "_" : sb.toString();
    }
}

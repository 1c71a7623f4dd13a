package org.tserve.config;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.UnaryOperator;

/**
 * The value type of a model setting: how a raw layer value (YAML, the models JSON, API parameters)
 * is read and checked, and how it is copied. Errors name the key and the layer.
 */
final class ModelValue<T> {
    /** Reads one raw value; null means "keep what lower layers set". */
    interface Reader<T> {
        T read(String key, Object raw, String source);
    }

    /** How a management API parameter (text) of this type becomes a layer value; NONE: not a parameter type. */
    enum ParamForm { INTEGER, BOOLEAN, TEXT, NONE }

    /** An integer ≥ 0. */
    static final ModelValue<Integer> COUNT = new ModelValue<>("integer ≥ 0", List.of(), ModelValue::count,
            UnaryOperator.identity(), ParamForm.INTEGER, "int");
    /** An integer ≥ 1 (a negative one gets the "must not be negative" error first, as before). */
    static final ModelValue<Integer> AT_LEAST_ONE = new ModelValue<>("integer ≥ 1", List.of(), (k, v, src) -> {
        int n = count(k, v, src);
        if (n < 1) {
            throw new ConfigException(src + ": '" + k + "' must be at least 1, got " + v);
        }
        return n;
    }, UnaryOperator.identity(), ParamForm.INTEGER, "int");
    /** An integer ≥ 0 where 0 keeps the lower layer's value (TorchServe: jobQueueSize ≤ 0 is the default). */
    static final ModelValue<Integer> POSITIVE_OR_KEEP = new ModelValue<>("integer ≥ 0 (0: keep the default)",
            List.of(), (k, v, src) -> {
                int n = count(k, v, src);
                return n > 0 ? n : null;
            }, UnaryOperator.identity(), ParamForm.INTEGER, "int");
    /** A YAML/JSON boolean (no strings: "yes" would be a typo hidden). */
    static final ModelValue<Boolean> FLAG = new ModelValue<>("true or false", List.of(), (k, v, src) -> {
        if (!(v instanceof Boolean)) {
            throw new ConfigException(src + ": '" + k + "' must be true or false, got " + v);
        }
        return (Boolean) v;
    }, UnaryOperator.identity(), ParamForm.BOOLEAN, "bool");
    static final ModelValue<List<Integer>> INT_LIST = new ModelValue<>("list of integers", List.of(), (k, v, src) -> {
        if (!(v instanceof List)) {
            throw new ConfigException(src + ": '" + k + "' must be a list of integers, got " + v);
        }
        List<Integer> ids = new ArrayList<>();
        for (Object o : (List<?>) v) {
            ids.add(toInt(k, o, src));
        }
        return ids;
    }, ArrayList::new, ParamForm.NONE, "tuple[int, ...]");
    static final ModelValue<Map<String, Object>> MAPPING = new ModelValue<>("mapping", List.of(), (k, v, src) -> {
        if (!(v instanceof Map)) {
            throw new ConfigException(src + ": '" + k + "' must be a mapping, got " + v);
        }
        Map<String, Object> m = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
            m.put(String.valueOf(e.getKey()), e.getValue());
        }
        return m;
    }, LinkedHashMap::new, ParamForm.NONE, "Mapping[str, Any]");

    /** For the docs table. */
    final String text;
    /** The accepted strings of a choice, else empty. */
    final List<String> choices;
    private final Reader<T> reader;
    private final UnaryOperator<T> copier;
    final ParamForm paramForm;
    /** Its type in the worker's ModelSettings (ts/generated/model_settings.py, written by {@link PythonKeys}). */
    final String pythonType;

    private ModelValue(String text, List<String> choices, Reader<T> reader, UnaryOperator<T> copier,
                       ParamForm paramForm, String pythonType) {
        this.paramForm = paramForm;
        this.pythonType = pythonType;
        this.text = text;
        this.choices = choices;
        this.reader = reader;
        this.copier = copier;
    }

    /**
     * One of {@code allowed}; {@code expected} is the error's wording (it may leave out
     * accepted values that are not advertised, as "cpu or gpu" leaves out neuron).
     */
    static ModelValue<String> oneOf(String expected, boolean ignoreCase, String... allowed) {
        List<String> ok = Arrays.asList(allowed);
        String text = String.join(" | ", ok.stream().map(c -> c.isEmpty() ? "\"\"" : c).toArray(String[]::new));
        return new ModelValue<>(text, ok, (k, v, src) -> {
            String s = toStr(k, v, src);
            String d = ignoreCase ? s.toLowerCase(Locale.ROOT) : s;
            if (!ok.contains(d)) {
                throw new ConfigException(src + ": '" + k + "' must be " + expected + ", got " + v);
            }
            return d;
        }, UnaryOperator.identity(), ParamForm.TEXT,
                "Literal[" + String.join(", ", ok.stream().map(c -> "\"" + c + "\"").toArray(String[]::new)) + "]");
    }

    /** The JSON schema of its API parameter (the OpenAPI document's). */
    String paramSchema() {
        switch (paramForm) {
            case INTEGER:
                return "{\"type\": \"integer\", \"format\": \"int32\", \"minimum\": " + (this == AT_LEAST_ONE ? 1 : 0) + "}";
            case BOOLEAN:
                return "{\"type\": \"boolean\"}";
            case TEXT:
                return "{\"type\": \"string\", \"enum\": [\"" + String.join("\", \"", choices) + "\"]}";
            default:
                throw new IllegalStateException("a " + text + " is not an API parameter");
        }
    }

    T read(String key, Object raw, String source) {
        return reader.read(key, raw, source);
    }

    /** A copy a later change to the original cannot reach (lists and maps are mutable). */
    T copy(T value) {
        return copier.apply(value);
    }

    private static int count(String k, Object v, String source) {
        int n = toInt(k, v, source);
        if (n < 0) {
            throw new ConfigException(source + ": '" + k + "' must not be negative, got " + v);
        }
        return n;
    }

    private static int toInt(String k, Object v, String source) {
        if (v instanceof Integer || v instanceof Long || v instanceof Short) {
            long l = ((Number) v).longValue();
            if (l > Integer.MAX_VALUE || l < Integer.MIN_VALUE) {
                throw new ConfigException(source + ": '" + k + "' is out of range: " + v);
            }
            return (int) l;
        }
        if (v instanceof Double && ((Double) v) == Math.rint((Double) v)) {
            return ((Double) v).intValue();
        }
        throw new ConfigException(source + ": '" + k + "' must be an integer, got " + v);
    }

    private static String toStr(String k, Object v, String source) {
        if (v instanceof String) {
            return (String) v;
        }
        throw new ConfigException(source + ": '" + k + "' must be a string, got " + v);
    }
}

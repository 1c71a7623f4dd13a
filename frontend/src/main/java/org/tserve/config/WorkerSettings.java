package org.tserve.config;

import com.google.gson.Gson;
import com.google.gson.JsonObject;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.tserve.dist.TorchrunOptions;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * The model settings a worker gets in LOAD: every {@link ModelKeys} entry sent to the worker
 * ({@link ModelKey#forWorker()}), under its model-config.yaml name, at its resolved value. The
 * worker reads them into one typed object (ts/generated/model_settings.py, written from the same
 * table by {@link PythonKeys}), so no field list is kept by hand on either side.
 */
public final class WorkerSettings {
    private static final Gson GSON = new Gson();

    private WorkerSettings() {
    }

    /**
     * Prints the settings LOAD carries for a model whose only layer is the model-config.yaml given as
     * the only argument (no config.properties, no register parameters), as one JSON line: what a
     * handler run without the server sees (examples/large_models/run_local.py). Exit 2 on a bad file.
     */
    public static void main(String[] args) throws IOException {
        Map<String, Object> yaml = new LinkedHashMap<>();
        try (Reader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            Object root = new Yaml(new SafeConstructor(new LoaderOptions())).load(in);
            if (root instanceof Map) {
                ((Map<?, ?>) root).forEach((k, v) -> yaml.put(String.valueOf(k), v));
            }
        }
        List<String> warnings = new ArrayList<>();
        try {
            ModelSettings s = new ModelSettings();
            s.apply(yaml, args[0], warnings);
            s.parallelLevel = TorchrunOptions.parse(args[0], s.parallelType, s.parallelLevel, s.torchrun, warnings)
                    .parallelLevel;
            warnings.forEach(System.err::println);
            System.out.println(toJson(s));
        } catch (ConfigException | IllegalArgumentException e) {
            System.err.println(e.getMessage());
            System.exit(2);
        }
    }

    /** {@code s}'s worker-facing settings as LOAD's fields, in declaration order. */
    public static JsonObject toJson(ModelSettings s) {
        JsonObject j = new JsonObject();
        for (ModelKey<?> k : ModelKeys.all()) {
            if (k.forWorker()) {
                j.add(k.name, GSON.toJsonTree(k.workerValue(s)));
            }
        }
        return j;
    }
}

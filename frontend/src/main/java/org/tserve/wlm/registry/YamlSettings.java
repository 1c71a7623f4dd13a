package org.tserve.wlm.registry;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.tserve.config.ConfigException;
import org.tserve.config.ModelSettings;
import org.tserve.config.WorkerSettings;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * Prints the settings LOAD carries for a model whose only layer is the model-config.yaml given as
 * the only argument (no config.properties, no register parameters), as one JSON line: what a
 * handler run without the server sees (ts/model_settings.py's resolve_model_yaml, used by
 * examples/large_models/run_local.py). Warnings go to stderr; a bad file exits 2 with the message.
 */
public final class YamlSettings {
    private YamlSettings() {
    }

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
            s.parallelLevel = SettingsResolver.distributed(args[0], s, warnings).parallelLevel;
            warnings.forEach(System.err::println);
            System.out.println(WorkerSettings.toJson(s));
        } catch (ConfigException e) {
            System.err.println(e.getMessage());
            System.exit(2);
        }
    }
}

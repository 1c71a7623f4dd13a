package org.tserve.wlm.registry;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelSettings;
import org.tserve.dist.TorchrunOptions;
import org.tserve.wlm.api.RegisterRequest;

/**
 * Resolves a model version's settings, lowest priority first: config.properties defaults, its
 * {@code models} JSON entry, the archive's model-config.yaml, then the register parameters.
 */
public final class SettingsResolver {
    private SettingsResolver() {
    }

    /**
     * @param defaultWorkers workers when nothing else says (default_workers_per_model, or the
     *     CPU/GPU count for startup models)
     * @param warnings receives one line per unknown or unsupported key
     */
    public static ModelSettings resolve(ConfigManager cfg, String name, String version, Map<String, Object> yaml,
                                        RegisterRequest req, int defaultWorkers, List<String> warnings) {
        ModelSettings s = ModelSettings.defaults(cfg, defaultWorkers);
        Map<String, Map<String, Object>> versions = cfg.getModelsJson().get(name);
        if (versions != null && versions.get(version) != null) {
            s.apply(versions.get(version), "config.properties models[" + name + "][" + version + "]", warnings);
        }
        s.apply(yaml, "model-config.yaml of " + name, warnings);
        Map<String, Object> api = new LinkedHashMap<>();
        if (req != null) {
            api.putAll(req.settings);
            if (req.initialWorkers != null) {
                api.put("minWorkers", req.initialWorkers);
                api.put("maxWorkers", Math.max(req.initialWorkers, req.maxWorkers != null ? req.maxWorkers : s.maxWorkers));
            } else if (req.maxWorkers != null) {
                api.put("maxWorkers", req.maxWorkers);
            }
        }
        s.apply(api, "register parameters", warnings);
        s.parallelLevel = distributed(name, s, warnings).parallelLevel;
        s.checkSequences(name);
        return s;
    }

    /**
     * The validated parallel/torchrun settings (TorchrunOptions.parse on the values as written,
     * so nproc-per-node differing from parallelLevel is caught).
     *
     * @throws ConfigException naming both values of an inconsistent pair
     */
    public static TorchrunOptions distributed(String name, ModelSettings s, List<String> warnings) {
        try {
            return TorchrunOptions.parse(name, s.parallelType, s.parallelLevel, s.torchrun, warnings);
        } catch (IllegalArgumentException e) {
            throw new ConfigException(e.getMessage());
        }
    }
}

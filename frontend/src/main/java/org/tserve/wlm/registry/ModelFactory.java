package org.tserve.wlm.registry;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import org.apache.logging.log4j.Logger;
import org.tserve.archive.Manifest;
import org.tserve.archive.ModelArchive;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelSettings;
import org.tserve.util.Logging;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.WlmException;

/** Builds a validated, not yet registered {@link Model} from a registration request and its archive. */
public final class ModelFactory {
    // logs as ModelManager did before the split: same log lines, same --log-config level
    private static final Logger LOG = Logging.logger(ModelFactory.class);
    private static final Pattern NAME = Pattern.compile("^[A-Za-z0-9][A-Za-z0-9_\\-.]*$");
    /**
     * A version goes into URLs, worker and thread names and every log line of its workers: the
     * name's characters (and '+'), at most {@link #MAX_VERSION} of them.
     */
    private static final Pattern VERSION = Pattern.compile("^[A-Za-z0-9][A-Za-z0-9_\\-.+]*$");
    static final int MAX_VERSION = 128;

    private final ConfigManager cfg;

    public ModelFactory(ConfigManager cfg) {
        this.cfg = cfg;
    }

    /**
     * The request's values win over the manifest's; the name falls back to the archive's file
     * name, the handler to default_service_handler.
     *
     * @throws WlmException 400 for an invalid name, runtime or setting, or no handler at all
     */
    public Model create(RegisterRequest req, ModelArchive archive) throws WlmException {
        Manifest m = archive.getManifest();
        String name = nonEmpty(req.modelName) ? req.modelName : m.modelName;
        if (!nonEmpty(name)) {
            String file = Path.of(req.url).getFileName().toString();
            name = file.replaceAll("(\\.tar\\.gz|\\.tgz|\\.mar|\\.zip)$", "");
        }
        if (!NAME.matcher(name).matches()) {
            throw new WlmException(400, "Invalid model name '" + name + "': use letters, digits, '_', '-' and '.', "
                    + "starting with a letter or digit");
        }
        String version = nonEmpty(m.modelVersion) ? m.modelVersion : "1.0";
        checkVersion(version);
        String runtime = nonEmpty(req.runtime) ? req.runtime : m.runtime;
        if (!runtime.equals("python") && !runtime.equals("python3") && !runtime.equals("LSP")) {
            throw new WlmException(400, "Invalid RuntimeType value: " + runtime + " (use python or python3)");
        }
        String handler = nonEmpty(req.handler) ? req.handler : m.handler;
        if (!nonEmpty(handler)) {
            handler = cfg.get("default_service_handler");
        }
        if (!nonEmpty(handler)) {
            throw new WlmException(400, "Model " + name + " has no handler: set one in the archive (--handler) or with "
                    + "the handler parameter");
        }
        int defaultWorkers = cfg.getInt("default_workers_per_model");
        if (req.loadedAtStartup && defaultWorkers == 0) {
            // startup models get a worker per device (or CPU) when nothing else says
            defaultWorkers = cfg.getNumberOfGpu() > 0 ? cfg.getNumberOfGpu() : Runtime.getRuntime().availableProcessors();
        }
        List<String> warnings = new ArrayList<>();
        ModelSettings settings;
        try {
            settings = SettingsResolver.resolve(cfg, name, version, archive.getYamlConfig(), req, defaultWorkers, warnings);
        } catch (ConfigException e) {
            throw new WlmException(400, e.getMessage());
        }
        for (String w : warnings) {
            LOG.warn("Model " + name + ": " + w);
        }
        return new Model(name, version, handler, runtime, archive, settings, req.loadedAtStartup);
    }

    /** Refuses a manifest version that could forge log lines, paths or URLs (400, naming the rule). */
    static void checkVersion(String version) throws WlmException {
        if (version.length() > MAX_VERSION || !VERSION.matcher(version).matches()) {
            throw new WlmException(400, "Invalid model version " + org.tserve.util.LogText.quote(version)
                    + " in the archive's manifest (modelVersion): use at most " + MAX_VERSION
                    + " letters, digits, '_', '-', '+' and '.', starting with a letter or digit "
                    + "(torch-model-archiver --version)");
        }
    }

    private static boolean nonEmpty(String s) {
        return s != null && !s.isEmpty();
    }
}

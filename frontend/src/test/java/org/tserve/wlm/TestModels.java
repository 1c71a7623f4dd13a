package org.tserve.wlm;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import org.tserve.archive.ModelArchive;
import org.tserve.config.Arguments;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.api.WlmListener;
import org.tserve.wlm.registry.Model;
import org.tserve.wlm.supervision.WorkerContext;
import org.tserve.wlm.supervision.WorkerEnvironment;

/** Configurations, archives and model versions for tests that start no worker process. */
public final class TestModels {
    private TestModels() {
    }

    /** A server configuration from {@code properties} (config.properties lines), written under {@code dir}. */
    public static ConfigManager config(Path dir, String properties) throws Exception {
        Path props = dir.resolve("config.properties");
        Files.write(props, ("model_store=" + dir + "\n" + properties).getBytes(StandardCharsets.UTF_8));
        return new ConfigManager(Arguments.parse(new String[] {"-f", props.toString()}), new HashMap<>());
    }

    /** A timer for the workers of {@link #workerContext} (a daemon: nothing to shut down). */
    private static final ScheduledThreadPoolExecutor TIMER = new ScheduledThreadPoolExecutor(1, r -> {
        Thread t = new Thread(r, "test-wlm-timer");
        t.setDaemon(true);
        return t;
    });

    /** A manager whose workers are never started: only their callbacks and scheduler are used. */
    public static ModelManager manager(Path dir, ConfigManager cfg) {
        return new ModelManager(cfg, environment(dir), dir);
    }

    /** Launch settings whose backend ({@code /bin/false}) exits at once. */
    public static WorkerEnvironment environment(Path dir) {
        return new WorkerEnvironment("/bin/false", dir, dir.toString(), null, true, false, "", true, "");
    }

    /** What workers made without a manager get: {@link #environment}, a shared timer, no listener. */
    public static WorkerContext workerContext(Path dir) {
        return new WorkerContext(environment(dir), TIMER, 1 << 20, new WlmListener() { });
    }

    /** An archive directory {@code dir/<folder>} with {@code manifest} as MAR-INF/MANIFEST.json, opened as {@code url}. */
    public static ModelArchive archive(Path dir, String folder, String manifest, String url) throws Exception {
        Path model = dir.resolve(folder);
        Files.createDirectories(model.resolve("MAR-INF"));
        Files.write(model.resolve("MAR-INF/MANIFEST.json"), manifest.getBytes(StandardCharsets.UTF_8));
        return ModelArchive.open(model, dir, url, null);
    }

    /** A version without archive (enough for the registry and the scaler). */
    public static Model model(String name, String version, ModelSettings s) {
        return model(name, version, s, null);
    }

    public static Model model(String name, String version, ModelSettings s, ModelArchive archive) {
        return new Model(name, version, "h.py", "python", archive, s, false);
    }

    public static Model model(String name, String version) {
        return model(name, version, new ModelSettings());
    }
}

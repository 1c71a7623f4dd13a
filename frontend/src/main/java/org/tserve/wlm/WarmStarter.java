package org.tserve.wlm;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;

/**
 * The zygote of warm worker starts ({@code python -m ts.zygote}): one template process per server
 * that has imported torch once and forks plain workers from there. Workers are launched through
 * {@code ts/zygote_launch.py}, which falls back to a cold start when the zygote is gone, so this
 * class only starts, watches and stops the zygote (docs/performance.md, "Warm starts").
 */
public final class WarmStarter {
    private static final Logger LOG = Logging.logger(WarmStarter.class);
    private static final Logger MODEL_LOG = Logging.named(Logging.MODEL_LOG);
    private final Process process;
    private final Path socket;
    private final Path launcher;

    private WarmStarter(Process process, Path socket, Path launcher) {
        this.process = process;
        this.socket = socket;
        this.launcher = launcher;
    }

    /**
     * Starts the zygote with the workers' interpreter and base environment; it preloads
     * {@code preload} (comma-separated modules) while the server starts. Returns null, with a
     * warning, when it cannot be started (workers then start cold).
     */
    public static WarmStarter start(String python, Path socketDir, String modelServerHome, String preload,
                                    String envBlacklist) {
        Path launcher = Path.of(modelServerHome, "ts", "zygote_launch.py");
        if (!Files.isRegularFile(launcher)) {
            LOG.warn("warm worker starts off: " + launcher + " not found");
            return null;
        }
        Path socket = socketDir.resolve("zygote.sock");
        ProcessBuilder pb = new ProcessBuilder(python, "-m", "ts.zygote", "--socket", socket.toString(),
                "--preload", preload);
        pb.directory(socketDir.toFile());
        pb.redirectErrorStream(true);
        Map<String, String> e = pb.environment();
        if (envBlacklist != null && !envBlacklist.isEmpty()) {
            Pattern p = Pattern.compile(envBlacklist);
            e.keySet().removeIf(k -> p.matcher(k).matches());
        }
        String existing = System.getenv("PYTHONPATH");
        e.put("PYTHONPATH", modelServerHome + (existing == null || existing.isEmpty() ? "" : File.pathSeparator + existing));
        e.put("PYTHONUNBUFFERED", "1");
        try {
            Process p = pb.start();
            p.getOutputStream().close();
            WarmStarter w = new WarmStarter(p, socket, launcher);
            w.pumpLogs();
            LOG.info("warm worker starts: zygote pid " + p.pid() + " preloading " + preload);
            return w;
        } catch (IOException ex) {
            LOG.warn("warm worker starts off: cannot start " + python + " -m ts.zygote: " + ex.getMessage());
            return null;
        }
    }

    private void pumpLogs() {
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    MODEL_LOG.info("zygote: " + line);
                }
            } catch (IOException ignored) {
                // the zygote closed its output
            }
            try {   // its output ends when it exits (or closes it): wait for the exit itself
                if (process.waitFor(5, java.util.concurrent.TimeUnit.SECONDS)) {
                    LOG.warn("warm worker starts: the zygote exited with status " + process.exitValue()
                            + "; workers start cold from now on");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "zygote-log");
        t.setDaemon(true);
        t.start();
    }

    /** Whether a new worker should be forked (else it starts cold). */
    boolean isAlive() {
        return process.isAlive();
    }

    /**
     * The command that starts a worker warm: the stdlib-only launcher in isolated mode, which asks
     * the zygote for a fork and otherwise execs {@code python -m ts.model_service_worker}.
     */
    List<String> command(String python, List<String> workerArgs) {
        List<String> cmd = new ArrayList<>(List.of(python, "-I", "-S", launcher.toString(), "--zygote",
                socket.toString(), "--"));
        cmd.addAll(workerArgs);
        return cmd;
    }

    /** Stops the zygote (its forked workers are stopped by their own supervisors first). */
    public void stop() {
        process.destroy();
        try {
            if (!process.waitFor(2, java.util.concurrent.TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
        }
    }
}

package org.tserve.wlm.supervision;

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
 * The zygote of warm worker starts ({@code python -m ts.warmstart.zygote}): one template process per server
 * that has imported torch once and forks plain workers from there. Workers are launched through
 * {@code ts/warmstart/launch.py}, which falls back to a cold start when the zygote is gone, so this
 * class only starts, watches and stops the zygote (docs/performance.md, "Warm starts").
 */
public final class WarmStarter {
    private static final Logger LOG = Logging.logger(WarmStarter.class);
    private static final Logger MODEL_LOG = Logging.named(Logging.MODEL_LOG);
    private final ProcessHandle process;
    private final Path socket;
    private final Path launcher;
    /** Started by the launcher (ts/warmstart/spawn.py): its socket folder is removed here at stop. */
    private final boolean adopted;
    private volatile boolean stopping;

    private WarmStarter(ProcessHandle process, Path socket, Path launcher, boolean adopted) {
        this.process = process;
        this.socket = socket;
        this.launcher = launcher;
        this.adopted = adopted;
    }

    /**
     * Takes over the zygote the launcher started before this JVM ({@code PID:SOCKET}): it watches and
     * stops it as its own. Returns null (the zygote stopped) when warm starts are off after all
     * (e.g. a {@code TS_*} variable turned them off) or it is gone already (workers start cold).
     */
    public static WarmStarter adopt(String pidAndSocket, String modelServerHome, boolean wanted) {
        int colon = pidAndSocket.indexOf(':');
        java.util.Optional<ProcessHandle> h = java.util.Optional.empty();
        try {
            h = ProcessHandle.of(Long.parseLong(pidAndSocket.substring(0, Math.max(colon, 0))));
        } catch (NumberFormatException e) {
            LOG.warn("warm worker starts off: --zygote " + pidAndSocket + " is not PID:SOCKET");
            return null;
        }
        Path socket = Path.of(pidAndSocket.substring(colon + 1));
        WarmStarter w = new WarmStarter(h.orElse(null), socket, launcherScript(modelServerHome), true);
        if (h.isEmpty() || !h.get().isAlive() || !wanted) {
            LOG.info("warm worker starts off: " + (wanted ? "the launcher's zygote has exited" : "warm_worker_start=false"));
            w.stop();
            return null;
        }
        w.watchExit();
        LOG.info("warm worker starts: zygote pid " + h.get().pid() + " (started by the launcher)");
        return w;
    }

    /** The stdlib-only launcher every warm-started worker runs (ts/warmstart/launch.py). */
    static Path launcherScript(String modelServerHome) {
        return Path.of(modelServerHome, "ts", "warmstart", "launch.py");
    }

    /**
     * Starts the zygote with the workers' interpreter and base environment; it preloads
     * {@code preload} (comma-separated modules) while the server starts. Returns null, with a
     * warning, when it cannot be started (workers then start cold).
     */
    public static WarmStarter start(String python, Path socketDir, String modelServerHome, String preload,
                                    String envBlacklist) {
        Path launcher = launcherScript(modelServerHome);
        if (!Files.isRegularFile(launcher)) {
            LOG.warn("warm worker starts off: " + launcher + " not found");
            return null;
        }
        Path socket = socketDir.resolve("zygote.sock");
        ProcessBuilder pb = new ProcessBuilder(python, "-m", "ts.warmstart.zygote", "--socket", socket.toString(),
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
            WarmStarter w = new WarmStarter(p.toHandle(), socket, launcher, false);
            w.pumpLogs(p);
            LOG.info("warm worker starts: zygote pid " + p.pid() + " preloading " + preload);
            return w;
        } catch (IOException ex) {
            LOG.warn("warm worker starts off: cannot start " + python + " -m ts.warmstart.zygote: " + ex.getMessage());
            return null;
        }
    }

    private void pumpLogs(Process process) {
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

    /** The launcher's zygote writes to the server's stdout; only its exit is watched here. */
    private void watchExit() {
        process.onExit().thenRun(() -> {
            if (!stopping) {
                LOG.warn("warm worker starts: the zygote exited; workers start cold from now on");
            }
        });
    }

    /** Whether a new worker should be forked (else it starts cold). */
    boolean isAlive() {
        return process != null && process.isAlive();
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
        stopping = true;
        if (process != null) {
            process.destroy();
            try {
                process.onExit().get(2, java.util.concurrent.TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                process.destroyForcibly();
            } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
                process.destroyForcibly();
            }
        }
        if (adopted) {   // the launcher made the folder for this server (ts/warmstart/spawn.py)
            try {
                Files.deleteIfExists(socket);
                Files.deleteIfExists(socket.getParent());
            } catch (IOException e) {
                LOG.warn("could not remove the zygote's socket folder " + socket.getParent() + ": " + e.getMessage());
            }
        }
    }
}

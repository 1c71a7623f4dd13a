package org.tserve.archive;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.logging.log4j.Logger;
import org.tserve.util.BoundedLines;
import org.tserve.util.Logging;

/**
 * Installs an archive's {@code requirementsFile} with
 * {@code <python> -m pip install --only-binary :all: -t <modelTmpDir>/deps -r <req>} (never into
 * the server's own environment): wheels only, so a requirement runs no build code, unless the
 * operator sets {@code install_py_dep_allow_source_builds=true}. pip runs at most
 * {@code install_py_dep_timeout} seconds (then its process tree is killed); its output goes to the
 * model log with lines cut at {@value #MAX_LINE} bytes and at most {@value #MAX_LOGGED_LINES} lines.
 */
public final class DependencyInstaller {
    private static final Logger MODEL_LOG = Logging.named(Logging.MODEL_LOG);
    static final int MAX_LINE = 4096;
    static final int MAX_LOGGED_LINES = 5000;
    private static final int TAIL_LINES = 15;

    /** What the operator allows: a time limit in seconds (0 = none) and source builds. */
    public static final class Options {
        final long timeoutSeconds;
        final boolean allowSourceBuilds;

        public Options(long timeoutSeconds, boolean allowSourceBuilds) {
            this.timeoutSeconds = timeoutSeconds;
            this.allowSourceBuilds = allowSourceBuilds;
        }
    }

    private DependencyInstaller() {
    }

    /** pip's command line for {@code reqFile}, installing into {@code deps}. */
    static List<String> command(String python, Path deps, Path reqFile, Options o) {
        List<String> cmd = new ArrayList<>(List.of(python, "-m", "pip", "install", "--disable-pip-version-check",
                "--no-input"));
        if (!o.allowSourceBuilds) {
            cmd.addAll(List.of("--only-binary", ":all:"));
        }
        cmd.addAll(List.of("-t", deps.toString(), "-r", reqFile.toString()));
        return cmd;
    }

    /** Runs pip; a failure or a timeout throws ArchiveException(400) carrying pip's error text. */
    public static void install(String python, String modelName, ModelArchive archive, Options o) throws ArchiveException {
        String req = archive.getManifest().requirementsFile;
        Path reqFile = archive.getModelDir().resolve(req).normalize();
        if (!reqFile.startsWith(archive.getModelDir()) || !Files.isRegularFile(reqFile)) {
            throw new ArchiveException(400, "Model " + modelName + ": requirementsFile " + req + " is missing from the archive");
        }
        Path deps = archive.getDepsDir();
        Deque<String> tail = new ArrayDeque<>();
        int code;
        Process p;
        try {
            Files.createDirectories(deps);
            p = new ProcessBuilder(command(python, deps, reqFile, o)).directory(archive.getModelDir().toFile())
                    .redirectErrorStream(true).start();
            p.getOutputStream().close();
        } catch (IOException e) {
            throw new ArchiveException(400, "Custom pip package installation failed for model " + modelName + ": cannot run "
                    + python + " -m pip: " + e.getMessage());
        }
        Thread reader = new Thread(() -> readOutput(p, modelName, tail), "pip-" + modelName);
        reader.setDaemon(true);
        reader.start();
        try {
            boolean done = o.timeoutSeconds > 0 ? p.waitFor(o.timeoutSeconds, TimeUnit.SECONDS) : p.waitFor() >= 0;
            if (!done) {
                p.descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
                reader.join(5000);
                throw new ArchiveException(400, "Custom pip package installation failed for model " + modelName
                        + ": pip did not finish within install_py_dep_timeout (" + o.timeoutSeconds + " s) and was stopped");
            }
            code = p.exitValue();
            reader.join(5000);
        } catch (InterruptedException e) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new ArchiveException(500, "Interrupted while installing dependencies of model " + modelName);
        }
        if (code != 0) {
            List<String> errors = new ArrayList<>();
            synchronized (tail) {
                for (String l : tail) {
                    if (l.contains("ERROR") || l.contains("error")) {
                        errors.add(l.trim());
                    }
                }
                if (errors.isEmpty()) {
                    errors.addAll(tail);
                }
            }
            String hint = o.allowSourceBuilds ? "" : " (only wheels are installed: install_py_dep_allow_source_builds=true "
                    + "lets pip build source distributions)";
            throw new ArchiveException(400, "Custom pip package installation failed for model " + modelName
                    + " (pip exit status " + code + "): " + String.join(" | ", errors) + hint);
        }
    }

    /** Copies pip's output to the model log (bounded) and keeps its last lines for the error message. */
    private static void readOutput(Process p, String modelName, Deque<String> tail) {
        int[] logged = {0};
        try {
            BoundedLines.read(p.getInputStream(), MAX_LINE, line -> {
                if (logged[0] < MAX_LOGGED_LINES) {
                    MODEL_LOG.info("[pip " + modelName + "] " + line);
                } else if (logged[0] == MAX_LOGGED_LINES) {
                    MODEL_LOG.warn("[pip " + modelName + "] more than " + MAX_LOGGED_LINES + " lines of output; the rest "
                            + "is not logged");
                }
                logged[0]++;
                synchronized (tail) {
                    tail.addLast(line.length() > 500 ? line.substring(0, 500) + " [cut]" : line);
                    if (tail.size() > TAIL_LINES) {
                        tail.removeFirst();
                    }
                }
            });
        } catch (IOException e) {
            MODEL_LOG.warn("[pip " + modelName + "] output could not be read: " + e.getMessage());
        }
    }
}

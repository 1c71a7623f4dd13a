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
 * Sets up a model's Python environment: installs an archive's {@code requirementsFile} with
 * {@code <python> -m pip install --only-binary :all: -t <modelTmpDir>/deps -r <req>}, or into the
 * model's own venv with {@code useVenv} (never into the server's own environment): wheels only, so a requirement runs no build code, unless the
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

    /** pip's command line for {@code reqFile}: into {@code deps}, or into the running venv when it is null. */
    static List<String> command(String python, Path deps, Path reqFile, Options o) {
        List<String> cmd = new ArrayList<>(List.of(python, "-m", "pip", "install", "--disable-pip-version-check",
                "--no-input"));
        if (!o.allowSourceBuilds) {
            cmd.addAll(List.of("--only-binary", ":all:"));
        }
        if (deps != null) {
            cmd.addAll(List.of("-t", deps.toString()));
        }
        cmd.addAll(List.of("-r", reqFile.toString()));
        return cmd;
    }

    /**
     * Creates the model's virtual environment ({@code useVenv}) with the server's interpreter
     * ({@code ts/utils/setup_model_venv.py}: the server's packages stay visible behind the venv's
     * own) and returns the venv's python. Bounded by {@code install_py_dep_timeout} like pip.
     */
    public static String createVenv(String python, String modelServerHome, String modelName, ModelArchive archive,
                                    Options o) throws ArchiveException {
        Path venv = archive.getVenvDir();
        ProcessBuilder pb = new ProcessBuilder(python, "-m", "ts.utils.setup_model_venv", venv.toString());
        pb.directory(archive.getModelDir().toFile());
        pb.environment().merge("PYTHONPATH", modelServerHome, (old, home) -> home + java.io.File.pathSeparator + old);
        run(pb, modelName, "venv", "Creating the virtual environment (useVenv) of model " + modelName + " failed", o);
        return archive.getVenvPython().toString();
    }

    /**
     * Runs pip with {@code python}: the server's interpreter installs into {@code <modelTmpDir>/deps},
     * a model venv's interpreter into the venv. A failure or a timeout throws ArchiveException(400)
     * carrying pip's error text.
     */
    public static void install(String python, String modelName, ModelArchive archive, Options o) throws ArchiveException {
        String req = archive.getManifest().requirementsFile;
        Path reqFile = archive.getModelDir().resolve(req).normalize();
        if (!reqFile.startsWith(archive.getModelDir()) || !Files.isRegularFile(reqFile)) {
            throw new ArchiveException(400, "Model " + modelName + ": requirementsFile " + req + " is missing from the archive");
        }
        boolean intoVenv = python.equals(archive.getVenvPython().toString());
        Path deps = intoVenv ? null : archive.getDepsDir();
        try {
            if (deps != null) {
                Files.createDirectories(deps);
            }
        } catch (IOException e) {
            throw new ArchiveException(500, "Model " + modelName + ": cannot create " + deps + ": " + e.getMessage());
        }
        String hint = o.allowSourceBuilds ? "" : " (only wheels are installed: install_py_dep_allow_source_builds=true "
                + "lets pip build source distributions)";
        ProcessBuilder pb = new ProcessBuilder(command(python, deps, reqFile, o)).directory(archive.getModelDir().toFile());
        run(pb, modelName, "pip", "Custom pip package installation failed for model " + modelName, o, hint);
    }

    private static void run(ProcessBuilder pb, String modelName, String tool, String failure, Options o)
            throws ArchiveException {
        run(pb, modelName, tool, failure, o, "");
    }

    /**
     * Runs one step of a model's environment setup in the model's directory, its output logged
     * (bounded); stops its process tree after the timeout. Throws ArchiveException(400) starting
     * with {@code failure} and carrying the step's error lines.
     */
    private static void run(ProcessBuilder pb, String modelName, String tool, String failure, Options o, String hint)
            throws ArchiveException {
        String python = pb.command().get(0);
        Deque<String> tail = new ArrayDeque<>();
        int code;
        Process p;
        try {
            p = pb.redirectErrorStream(true).start();
            p.getOutputStream().close();
        } catch (IOException e) {
            throw new ArchiveException(400, failure + ": cannot run " + python + ": " + e.getMessage());
        }
        Thread reader = new Thread(() -> readOutput(p, modelName, tool, tail), tool + "-" + modelName);
        reader.setDaemon(true);
        reader.start();
        try {
            boolean done = o.timeoutSeconds > 0 ? p.waitFor(o.timeoutSeconds, TimeUnit.SECONDS) : p.waitFor() >= 0;
            if (!done) {
                p.descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
                reader.join(5000);
                throw new ArchiveException(400, failure + ": " + tool + " did not finish within install_py_dep_timeout ("
                        + o.timeoutSeconds + " s) and was stopped");
            }
            code = p.exitValue();
            reader.join(5000);
        } catch (InterruptedException e) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new ArchiveException(500, "Interrupted while setting up the Python environment of model " + modelName);
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
            throw new ArchiveException(400, failure + " (" + tool + " exit status " + code + "): "
                    + String.join(" | ", errors) + hint);
        }
    }

    /** Copies pip's output to the model log (bounded) and keeps its last lines for the error message. */
    private static void readOutput(Process p, String modelName, String tool, Deque<String> tail) {
        int[] logged = {0};
        try {
            BoundedLines.read(p.getInputStream(), MAX_LINE, line -> {
                if (logged[0] < MAX_LOGGED_LINES) {
                    MODEL_LOG.info("[" + tool + " " + modelName + "] " + line);
                } else if (logged[0] == MAX_LOGGED_LINES) {
                    MODEL_LOG.warn("[" + tool + " " + modelName + "] more than " + MAX_LOGGED_LINES + " lines of output; the rest "
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
            MODEL_LOG.warn("[" + tool + " " + modelName + "] output could not be read: " + e.getMessage());
        }
    }
}

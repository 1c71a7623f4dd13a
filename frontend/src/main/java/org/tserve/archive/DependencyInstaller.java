package org.tserve.archive;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.logging.Logger;
import org.tserve.util.Logging;

/**
 * Installs an archive's {@code requirementsFile} with
 * {@code <python> -m pip install -t <modelTmpDir>/deps -r <req>} (never into the server's own
 * environment); pip's output goes to the model log.
 */
public final class DependencyInstaller {
    private static final Logger MODEL_LOG = Logger.getLogger(Logging.MODEL_LOG);

    private DependencyInstaller() {
    }

    /** Runs pip; a failure throws ArchiveException(400) carrying pip's error text. */
    public static void install(String python, String modelName, ModelArchive archive) throws ArchiveException {
        String req = archive.getManifest().requirementsFile;
        Path reqFile = archive.getModelDir().resolve(req).normalize();
        if (!reqFile.startsWith(archive.getModelDir()) || !Files.isRegularFile(reqFile)) {
            throw new ArchiveException(400, "Model " + modelName + ": requirementsFile " + req + " is missing from the archive");
        }
        Path deps = archive.getDepsDir();
        List<String> cmd = new ArrayList<>(List.of(python, "-m", "pip", "install", "--disable-pip-version-check",
                "--no-input", "-t", deps.toString(), "-r", reqFile.toString()));
        Deque<String> tail = new ArrayDeque<>();
        int code;
        try {
            Files.createDirectories(deps);
            ProcessBuilder pb = new ProcessBuilder(cmd).directory(archive.getModelDir().toFile()).redirectErrorStream(true);
            Process p = pb.start();
            p.getOutputStream().close();
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    MODEL_LOG.info("[pip " + modelName + "] " + line);
                    tail.addLast(line);
                    if (tail.size() > 15) {
                        tail.removeFirst();
                    }
                }
            }
            code = p.waitFor();
        } catch (IOException e) {
            throw new ArchiveException(400, "Custom pip package installation failed for model " + modelName + ": cannot run "
                    + python + " -m pip: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ArchiveException(500, "Interrupted while installing dependencies of model " + modelName);
        }
        if (code != 0) {
            List<String> errors = new ArrayList<>();
            for (String l : tail) {
                if (l.contains("ERROR") || l.contains("error")) {
                    errors.add(l.trim());
                }
            }
            String text = String.join(" | ", errors.isEmpty() ? new ArrayList<>(tail) : errors);
            throw new ArchiveException(400, "Custom pip package installation failed for model " + modelName
                    + " (pip exit status " + code + "): " + text);
        }
    }
}

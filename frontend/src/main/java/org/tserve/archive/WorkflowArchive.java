package org.tserve.archive;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.UUID;
import org.tserve.util.Json;

/**
 * An opened workflow archive (.war, made by torch-workflow-archiver): extracted into
 * {@code <tmpRoot>/workflows/<uuid>/}, with its {@code WAR-INF/MANIFEST.json} (workflowName,
 * specFile, handler) and the parsed spec YAML.
 *
 * <p>The extracted folder doubles as the archive of the workflow's function nodes: each is
 * registered as a handler-only model whose handler is {@code <handler module>:<function>}, so a
 * {@code MAR-INF/MANIFEST.json} naming the workflow is written beside the files.
 */
public final class WorkflowArchive {
    private final Path dir;
    private final String name;
    private final String url;
    private final Path handlerFile;
    private final Map<String, Object> spec;
    private final Path downloadedFile;

    private WorkflowArchive(Path dir, String name, String url, Path handlerFile, Map<String, Object> spec,
                            Path downloadedFile) {
        this.dir = dir;
        this.name = name;
        this.url = url;
        this.handlerFile = handlerFile;
        this.spec = spec;
        this.downloadedFile = downloadedFile;
    }

    /**
     * Extracts {@code war} and reads its manifest and spec; {@code name} (may be null) overrides
     * the manifest's workflowName. Every problem is an ArchiveException(400) naming the file.
     */
    public static WorkflowArchive open(Path war, Path tmpRoot, String url, String name, Path downloadedFile)
            throws ArchiveException {
        Path dir = tmpRoot.resolve("workflows").resolve(UUID.randomUUID().toString().replace("-", ""));
        String file = String.valueOf(war.getFileName());
        try {
            Files.createDirectories(dir);
            if (Files.isDirectory(war)) {
                throw new ArchiveException(400, "Workflow archive " + file + " is a folder: give the .war file made by "
                        + "torch-workflow-archiver");
            }
            Extractor.unzip(war, dir);
            JsonObject workflow = manifestWorkflow(dir, file);
            String wfName = name != null && !name.isEmpty() ? name : str(workflow, "workflowName");
            if (wfName == null || !wfName.matches("^[A-Za-z0-9][A-Za-z0-9_\\-.]*$")) {
                throw new ArchiveException(400, "Invalid workflow name '" + wfName + "' in " + file + ": use letters, digits, "
                        + "'_', '-' and '.', starting with a letter or digit (or give workflow_name)");
            }
            Path specFile = member(dir, file, str(workflow, "specFile"), "specFile");
            if (specFile == null) {
                throw new ArchiveException(400, "Workflow archive " + file + " names no specFile in WAR-INF/MANIFEST.json");
            }
            Path handler = member(dir, file, str(workflow, "handler"), "handler");
            Map<String, Object> spec = ModelArchive.parseYaml(specFile);
            writeModelManifest(dir, wfName, handler);
            return new WorkflowArchive(dir, wfName, url, handler, spec, downloadedFile);
        } catch (IOException e) {
            ModelArchive.deleteTree(dir);
            throw new ArchiveException(400, "Cannot extract workflow archive " + file + ": " + e.getMessage());
        } catch (ArchiveException e) {
            ModelArchive.deleteTree(dir);
            throw e;
        } catch (RuntimeException e) {
            // a malformed archive must not leave its folder behind or answer 500
            ModelArchive.deleteTree(dir);
            throw new ArchiveException(400, "Cannot extract workflow archive " + file + ": " + e);
        }
    }

    private static JsonObject manifestWorkflow(Path dir, String file) throws IOException, ArchiveException {
        Path mf = dir.resolve("WAR-INF").resolve("MANIFEST.json");
        if (!Files.isRegularFile(mf)) {
            throw new ArchiveException(400, "Workflow archive " + file + " has no WAR-INF/MANIFEST.json: build it with "
                    + "torch-workflow-archiver");
        }
        JsonElement root;
        try {
            root = Json.parse(new String(Files.readAllBytes(mf), StandardCharsets.UTF_8));
        } catch (RuntimeException e) {
            throw new ArchiveException(400, file + ": WAR-INF/MANIFEST.json is not valid JSON: " + e.getMessage());
        }
        if (!root.isJsonObject() || !root.getAsJsonObject().has("workflow")
                || !root.getAsJsonObject().get("workflow").isJsonObject()) {
            throw new ArchiveException(400, file + ": WAR-INF/MANIFEST.json has no \"workflow\" object");
        }
        return root.getAsJsonObject().getAsJsonObject("workflow");
    }

    /** A file the manifest names, which must lie in the archive; null when the manifest names none. */
    private static Path member(Path dir, String file, String member, String key) throws ArchiveException {
        if (member == null || member.isEmpty()) {
            return null;
        }
        Path p = dir.resolve(member).normalize();
        if (!p.startsWith(dir) || !Files.isRegularFile(p)) {
            throw new ArchiveException(400, "Workflow archive " + file + ": " + key + " " + member
                    + " named in WAR-INF/MANIFEST.json is missing from the archive");
        }
        return p;
    }

    private static void writeModelManifest(Path dir, String wfName, Path handler) throws IOException {
        JsonObject model = new JsonObject();
        model.addProperty("modelName", wfName);
        model.addProperty("modelVersion", "1.0");
        if (handler != null) {
            model.addProperty("handler", handler.getFileName().toString());
        }
        JsonObject root = new JsonObject();
        root.add("model", model);
        Path mar = dir.resolve("MAR-INF");
        Files.createDirectories(mar);
        Files.write(mar.resolve("MANIFEST.json"), root.toString().getBytes(StandardCharsets.UTF_8));
    }

    private static String str(JsonObject o, String key) {
        JsonElement e = o.get(key);
        return e == null || e.isJsonNull() ? null : e.getAsString();
    }

    /** The extracted folder (also the model folder of the function nodes). */
    public Path getDir() {
        return dir;
    }

    public String getName() {
        return name;
    }

    /** The url it was registered from. */
    public String getUrl() {
        return url;
    }

    /** The workflow handler .py, or null when the archive has none. */
    public Path getHandlerFile() {
        return handlerFile;
    }

    /** The spec YAML as a mapping. */
    public Map<String, Object> getSpec() {
        return spec;
    }

    /** Removes the extracted folder and a downloaded .war. */
    public void delete() {
        ModelArchive.deleteTree(dir);
        if (downloadedFile != null) {
            try {
                Files.deleteIfExists(downloadedFile);
            } catch (IOException e) {
                org.tserve.util.Logging.logger(WorkflowArchive.class)
                        .warn("Cannot delete downloaded workflow archive " + downloadedFile + ": " + e.getMessage());
            }
        }
    }
}

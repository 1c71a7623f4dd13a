package org.tserve.archive;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.logging.log4j.Logger;
import org.tserve.config.Compatibility;
import org.tserve.util.Logging;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * An opened model archive: the directory its files live in, the manifest, the parsed
 * model-config.yaml, and a private temporary directory (deleted by {@link #delete()}).
 */
public final class ModelArchive {
    private static final Logger LOG = Logging.logger(ModelArchive.class);

    private final Path modelDir;
    private final Path tmpDir;
    private final Manifest manifest;
    private final Map<String, Object> yamlConfig;
    private final String url;
    private final Path downloadedFile;

    private ModelArchive(Path modelDir, Path tmpDir, Manifest manifest, Map<String, Object> yamlConfig, String url,
                         Path downloadedFile) {
        this.modelDir = modelDir;
        this.tmpDir = tmpDir;
        this.manifest = manifest;
        this.yamlConfig = yamlConfig;
        this.url = url;
        this.downloadedFile = downloadedFile;
    }

    /**
     * Opens {@code source} (a .mar, a .tar.gz/.tgz, or a directory) into
     * {@code <tmpRoot>/models/<uuid>/}.
     */
    public static ModelArchive open(Path source, Path tmpRoot, String url, Path downloadedFile) throws ArchiveException {
        Path tmp = tmpRoot.resolve("models").resolve(UUID.randomUUID().toString().replace("-", ""));
        try {
            Files.createDirectories(tmp);
            Path modelDir;
            if (Files.isDirectory(source)) {
                modelDir = source.toAbsolutePath();
                if (!Files.exists(modelDir.resolve("MAR-INF"))) {
                    List<Path> children;
                    try (Stream<Path> s = Files.list(modelDir)) {
                        children = s.collect(Collectors.toList());
                    }
                    if (children.size() == 1 && Files.isDirectory(children.get(0))) {
                        modelDir = children.get(0);
                    }
                }
            } else {
                modelDir = tmp.resolve("model");
                Files.createDirectories(modelDir);
                if (isZip(source)) {
                    Extractor.unzip(source, modelDir);
                } else if (isGzip(source) || !Compatibility.current().junkArchiveReadAsEmpty()) {
                    Extractor.untarGz(source, modelDir);
                } else {
                    return junk(source, modelDir, tmp, url, downloadedFile);
                }
            }
            Manifest manifest = new Manifest();
            Path mf = modelDir.resolve("MAR-INF").resolve("MANIFEST.json");
            if (Files.isRegularFile(mf)) {
                manifest = Manifest.parse(new String(Files.readAllBytes(mf), StandardCharsets.UTF_8));
            } else {
                LOG.warn("Model archive " + source.getFileName() + " has no MAR-INF/MANIFEST.json; using defaults");
            }
            Map<String, Object> yaml = new LinkedHashMap<>();
            if (manifest.configFile != null) {
                Path cf = modelDir.resolve(manifest.configFile).normalize();
                if (!cf.startsWith(modelDir) || !Files.isRegularFile(cf)) {
                    throw new ArchiveException(400, "Model archive " + source.getFileName() + ": configFile "
                            + manifest.configFile + " named in MANIFEST.json is missing from the archive");
                }
                yaml = parseYaml(cf);
            }
            return new ModelArchive(modelDir, tmp, manifest, yaml, url, downloadedFile);
        } catch (IOException e) {
            deleteTree(tmp);
            throw new ArchiveException(400, "Cannot extract model archive " + source.getFileName() + ": " + e.getMessage());
        } catch (ArchiveException e) {
            deleteTree(tmp);
            throw e;
        } catch (RuntimeException e) {
            // a malformed archive must not leave its folder behind or answer 500
            deleteTree(tmp);
            throw new ArchiveException(400, "Cannot extract model archive " + source.getFileName() + ": " + e);
        }
    }

    /**
     * compatibility=torchserve-0.12: a file that is neither zip nor gzip is read as TorchServe reads
     * it, an empty archive with a default manifest, so the model is registered and listed; its
     * handler names the file, so each worker's load fails saying which archive to replace.
     */
    private static ModelArchive junk(Path source, Path modelDir, Path tmp, String url, Path downloadedFile) {
        LOG.warn("Model archive " + source.getFileName() + " is neither a .mar (zip) nor a .tar.gz: read as an empty "
                + "archive with a default manifest (compatibility=torchserve-0.12); its workers cannot load");
        Manifest manifest = new Manifest();
        manifest.handler = "unreadable_archive:" + source.getFileName();
        return new ModelArchive(modelDir, tmp, manifest, new LinkedHashMap<>(), url, downloadedFile);
    }

    /** Whether {@code p} is a file that is neither a zip nor a gzip stream (nor a directory). */
    public static boolean isUnreadable(Path p) throws IOException {
        return Files.isRegularFile(p) && !isZip(p) && !isGzip(p);
    }

    private static boolean isGzip(Path p) throws IOException {
        try (InputStream in = Files.newInputStream(p)) {
            byte[] magic = in.readNBytes(2);
            return magic.length == 2 && (magic[0] & 0xff) == 0x1f && (magic[1] & 0xff) == 0x8b;
        }
    }

    private static boolean isZip(Path p) throws IOException {
        try (InputStream in = Files.newInputStream(p)) {
            byte[] magic = in.readNBytes(4);
            return magic.length == 4 && magic[0] == 'P' && magic[1] == 'K';
        }
    }

    /** Parses a model-config.yaml into a map; anything but a mapping is an error naming the file. */
    public static Map<String, Object> parseYaml(Path file) throws ArchiveException {
        try (InputStream in = Files.newInputStream(file)) {
            Object o = new Yaml(new SafeConstructor(new LoaderOptions())).load(in);
            if (o == null) {
                return new LinkedHashMap<>();
            }
            if (!(o instanceof Map)) {
                throw new ArchiveException(400, file.getFileName() + " must be a YAML mapping of settings");
            }
            Map<String, Object> out = new LinkedHashMap<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                out.put(String.valueOf(e.getKey()), e.getValue());
            }
            return out;
        } catch (IOException | RuntimeException e) {
            throw new ArchiveException(400, file.getFileName() + " is not valid YAML: " + e.getMessage().replace('\n', ' '));
        }
    }

    public Path getModelDir() {
        return modelDir;
    }

    public Path getTmpDir() {
        return tmpDir;
    }

    public Manifest getManifest() {
        return manifest;
    }

    public Map<String, Object> getYamlConfig() {
        return yamlConfig;
    }

    public String getUrl() {
        return url;
    }

    /** Dir of per-model pip dependencies, when they were installed. */
    public Path getDepsDir() {
        return tmpDir.resolve("deps");
    }

    /** Dir of the model's own virtual environment ({@code useVenv}), when it was created. */
    public Path getVenvDir() {
        return tmpDir.resolve("venv");
    }

    /** The python of {@link #getVenvDir()}. */
    public Path getVenvPython() {
        return getVenvDir().resolve("bin").resolve("python");
    }

    /** Removes the temporary directory and the downloaded archive, if any. */
    public void delete() {
        deleteTree(tmpDir);
        if (downloadedFile != null) {
            try {
                Files.deleteIfExists(downloadedFile);
            } catch (IOException e) {
                LOG.warn("Cannot delete downloaded archive " + downloadedFile + ": " + e.getMessage());
            }
        }
    }

    /**
     * Deletes a directory tree without following links out of it. Another delete of the same tree
     * may run at once (an unregister and the failed synchronous registration of the same version
     * both retire it): what it removed first is skipped, never an error.
     */
    public static void deleteTree(Path dir) {
        if (dir == null || !Files.exists(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try {
            Files.walkFileTree(dir, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
                    deleteOne(file);
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFileFailed(Path file, IOException e) {
                    if (!(e instanceof NoSuchFileException)) {
                        LOG.debug("cannot read " + file + ": " + e.getMessage());
                    }
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult postVisitDirectory(Path d, IOException e) {
                    deleteOne(d);
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException e) {
            LOG.warn("Cannot delete " + dir + ": " + e.getMessage());
        }
    }

    private static void deleteOne(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException e) {
            LOG.debug("cannot delete " + p + ": " + e.getMessage());
        }
    }
}

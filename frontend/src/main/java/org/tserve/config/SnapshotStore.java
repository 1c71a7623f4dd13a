package org.tserve.config;

import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;

/**
 * Config snapshots as TorchServe writes them: {@code <LOG_LOCATION>/config/<yyyyMMddHHmmssSSS>-<type>.cfg}
 * (type {@code startup}, {@code snapshot} after a management change, {@code shutdown}), each the
 * configuration plus {@code model_snapshot}. Files are written to a temporary name and renamed, by
 * one background thread (never on a request's thread or under a model lock); only the newest
 * {@code max_config_snapshots} are kept.
 */
public final class SnapshotStore {
    private static final Logger LOG = Logging.logger(SnapshotStore.class);
    private static final Pattern NAME = Pattern.compile("^\\d{17}-(startup|snapshot|shutdown)\\.cfg$");

    private final Path dir;
    private final int keep;
    private final Map<String, String> config;
    private final Supplier<ModelSnapshot> models;
    private final ExecutorService writer = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "config-snapshot");
        t.setDaemon(true);
        return t;
    });
    /** A change snapshot is queued: later changes are in it too, so they need no second one. */
    private final AtomicBoolean changePending = new AtomicBoolean();
    private long lastMillis;

    /**
     * @param config the configured keys (without {@code model_snapshot}) every snapshot repeats
     * @param models captures the registered models when a snapshot is written
     */
    public SnapshotStore(Path dir, int keep, Map<String, String> config, Supplier<ModelSnapshot> models) {
        this.dir = dir;
        this.keep = keep;
        this.config = config;
        this.models = models;
    }

    /** {@code <LOG_LOCATION or ./logs>/config}, where TorchServe keeps its snapshots. */
    public static Path directory(Map<String, String> env) {
        String loc = env.get("LOG_LOCATION");
        return Paths.get(loc == null || loc.isEmpty() ? "logs" : loc, "config").toAbsolutePath();
    }

    /** The newest snapshot in {@code dir} (by the timestamp its name starts with), or null. */
    public static Path latest(Path dir) {
        List<Path> all = list(dir);
        return all.isEmpty() ? null : all.get(all.size() - 1);
    }

    private static List<Path> list(Path dir) {
        List<Path> out = new ArrayList<>();
        if (!Files.isDirectory(dir)) {
            return out;
        }
        try (Stream<Path> s = Files.list(dir)) {
            s.filter(p -> NAME.matcher(p.getFileName().toString()).matches() && Files.isRegularFile(p))
                    .sorted().forEach(out::add);
        } catch (IOException e) {
            LOG.warn("Cannot list config snapshots in " + dir + ": " + e.getMessage());
        }
        return out;
    }

    /** Writes a snapshot now, on the caller's thread (startup and shutdown); failures are logged. */
    public void writeNow(String type) {
        try {
            writer.submit(() -> write(type)).get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            LOG.warn("Config snapshot (" + type + ") not written: " + e);
        }
    }

    /** Queues a snapshot after a management change; returns at once. */
    public void changed() {
        if (changePending.compareAndSet(false, true)) {
            writer.execute(() -> {
                changePending.set(false);
                write("snapshot");
            });
        }
    }

    /** Waits (bounded) for queued snapshots, then stops the writer thread. */
    public void close() {
        writer.shutdown();
        try {
            writer.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void write(String type) {
        String file = nextName(type);
        try {
            Files.createDirectories(dir);
            ModelSnapshot snap = new ModelSnapshot(file, models.get().versions());
            Properties p = new Properties();
            p.putAll(config);
            p.setProperty("model_snapshot", snap.toJson(System.currentTimeMillis()).toString());
            Path tmp = dir.resolve("." + file + ".tmp");
            Files.deleteIfExists(tmp);
            // owner-only: the configuration may hold keystore_pass or cluster_key
            Files.createFile(tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
            try (Writer w = new OutputStreamWriter(Files.newOutputStream(tmp), StandardCharsets.UTF_8)) {
                p.store(w, "tserve config snapshot (" + type + ")");
            }
            Files.move(tmp, dir.resolve(file), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            LOG.info("Config snapshot " + dir.resolve(file) + " written (" + snap.versions().size() + " model versions)");
            prune();
        } catch (IOException | RuntimeException e) {
            LOG.warn("Config snapshot " + dir.resolve(file) + " not written: " + e);
        }
    }

    /** A name later than every earlier one, even when two snapshots fall in the same millisecond. */
    private String nextName(String type) {
        long now = Math.max(System.currentTimeMillis(), lastMillis + 1);
        lastMillis = now;
        return new SimpleDateFormat("yyyyMMddHHmmssSSS").format(new Date(now)) + "-" + type + ".cfg";
    }

    private void prune() throws IOException {
        List<Path> all = list(dir);
        for (int i = 0; i < all.size() - keep; i++) {
            Files.deleteIfExists(all.get(i));
        }
    }
}

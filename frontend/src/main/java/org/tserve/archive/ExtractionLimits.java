package org.tserve.archive;

/**
 * What unpacking one archive may produce: extracted bytes in total, number of entries, and the
 * ratio of extracted bytes to the archive's own size (checked once more than
 * {@link #RATIO_FLOOR} bytes came out, so small archives of text never trip it). Set from
 * {@code max_archive_extracted_size}, {@code max_archive_entries} and
 * {@code max_archive_compression_ratio}; 0 turns a limit off.
 */
public final class ExtractionLimits {
    /** Extracted bytes below which the compression ratio is not checked. */
    public static final long RATIO_FLOOR = 16L << 20;
    /** The defaults of the three config keys. */
    public static final ExtractionLimits DEFAULT = new ExtractionLimits(64L << 30, 100_000, 200);

    private static volatile ExtractionLimits current = DEFAULT;

    public final long maxBytes;
    public final long maxEntries;
    public final long maxRatio;

    public ExtractionLimits(long maxBytes, long maxEntries, long maxRatio) {
        this.maxBytes = maxBytes;
        this.maxEntries = maxEntries;
        this.maxRatio = maxRatio;
    }

    /** The limits archives are opened with (set once at startup from the configuration). */
    public static ExtractionLimits current() {
        return current;
    }

    public static void setCurrent(ExtractionLimits limits) {
        current = limits;
    }

    /** Counts what one extraction produced and refuses to go past a limit (400 naming it). */
    static final class Budget {
        private final ExtractionLimits limits;
        private final String archive;
        private final long archiveSize;
        private long bytes;
        private long entries;

        Budget(ExtractionLimits limits, String archive, long archiveSize) {
            this.limits = limits;
            this.archive = archive;
            this.archiveSize = Math.max(1, archiveSize);
        }

        void entry() throws ArchiveException {
            entries++;
            if (limits.maxEntries > 0 && entries > limits.maxEntries) {
                throw new ArchiveException(400, "Model archive " + archive + " has more than " + limits.maxEntries
                        + " entries (max_archive_entries); raise max_archive_entries if the archive is trusted");
            }
        }

        void bytes(long n) throws ArchiveException {
            bytes += n;
            if (limits.maxBytes > 0 && bytes > limits.maxBytes) {
                throw new ArchiveException(400, "Model archive " + archive + " expands to more than " + limits.maxBytes
                        + " bytes (max_archive_extracted_size); raise max_archive_extracted_size if the archive is trusted");
            }
            if (limits.maxRatio > 0 && bytes > RATIO_FLOOR && bytes / archiveSize > limits.maxRatio) {
                throw new ArchiveException(400, "Model archive " + archive + " (" + archiveSize + " bytes) expands more than "
                        + limits.maxRatio + " times (max_archive_compression_ratio); raise max_archive_compression_ratio "
                        + "if the archive is trusted");
            }
        }
    }
}

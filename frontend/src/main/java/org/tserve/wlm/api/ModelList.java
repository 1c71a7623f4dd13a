package org.tserve.wlm.api;

import java.util.List;

/** A page of the model list; {@code nextPageToken} is null on the last page. */
public record ModelList(List<Entry> models, String nextPageToken) {
    /** A listed model (its default version). */
    public record Entry(String modelName, String modelUrl) {
    }
}

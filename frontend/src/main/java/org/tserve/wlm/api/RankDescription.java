package org.tserve.wlm.api;

/**
 * One rank of a distributed worker as describe shows it: its global rank, process id (-1 until
 * it answered LOAD), devices ("0,1", or "cpu") and state (STARTING, READY, RESTARTING, STOPPED).
 */
public record RankDescription(int rank, long pid, String devices, String state) {
    /** As describe's json shows it: {@code {"rank", "pid", "devices", "state"}}. */
    public com.google.gson.JsonObject toJson() {
        com.google.gson.JsonObject o = new com.google.gson.JsonObject();
        o.addProperty("rank", rank);
        o.addProperty("pid", pid);
        o.addProperty("devices", devices);
        o.addProperty("state", state);
        return o;
    }
}

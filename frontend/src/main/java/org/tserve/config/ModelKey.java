package org.tserve.config;

import java.util.function.BiConsumer;
import java.util.function.Function;

/**
 * One model setting (a model-config.yaml key), declared once in {@link ModelKeys}: its name, value
 * type, default, doc line, where else it can be set, how describe shows it, what the worker gets in
 * LOAD, and the {@link ModelSettings} field that holds it. Reading, copying, describing and the
 * worker's settings ({@link WorkerSettings}, {@link PythonKeys}) go through here.
 */
public final class ModelKey<T> {
    /** Where describe shows a key: among TorchServe's fields (before loadedAtStartup), after them, or not. */
    public enum Shown { TORCHSERVE, TSERVE, HIDDEN }

    public final String name;
    public final String doc;
    final ModelValue<T> value;
    final T defaultValue;
    private final Function<ModelSettings, T> get;
    private final BiConsumer<ModelSettings, T> set;
    /** The management API's register parameter for it, or null. */
    String apiParam;
    /** The config.properties key whose value is its default (an integer key), or null. */
    String serverDefault;
    Shown shown = Shown.TORCHSERVE;
    String shownAs;
    /** Describe's value when it is derived (an effective limit), else null: the field. */
    private Function<ModelSettings, ?> shownValue;
    /** The resolved value the worker gets in LOAD (the field unless declared), or null: not sent. */
    private Function<ModelSettings, T> toWorker;
    /** True when {@link #toWorker} is not the field (the value in effect, not the one set). */
    boolean workerDerived;

    ModelKey(String name, ModelValue<T> value, T defaultValue, Function<ModelSettings, T> get,
             BiConsumer<ModelSettings, T> set, String doc) {
        this.name = name;
        this.value = value;
        this.defaultValue = defaultValue;
        this.get = get;
        this.set = set;
        this.doc = doc;
        this.shownAs = name;
        this.toWorker = get;
    }

    ModelKey<T> api(String param) {
        if (value.paramForm == ModelValue.ParamForm.NONE) {
            throw new IllegalArgumentException(name + ": a " + value.text + " cannot be an API parameter");
        }
        this.apiParam = param;
        return this;
    }

    ModelKey<T> defaultFrom(String configKey) {
        this.serverDefault = configKey;
        return this;
    }

    ModelKey<T> shown(Shown where) {
        this.shown = where;
        return this;
    }

    ModelKey<T> shownAs(String describeName) {
        this.shownAs = describeName;
        return this;
    }

    ModelKey<T> shownValue(Function<ModelSettings, ?> f) {
        this.shownValue = f;
        return this;
    }

    /** The worker gets {@code f}'s value (an effective value, an alias folded in) instead of the field. */
    ModelKey<T> toWorker(Function<ModelSettings, T> f) {
        this.toWorker = f;
        this.workerDerived = true;
        return this;
    }

    /** Not sent to the worker (an alias whose meaning another key carries). */
    ModelKey<T> notForWorker() {
        this.toWorker = null;
        return this;
    }

    /** Whether LOAD carries it. */
    public boolean forWorker() {
        return toWorker != null;
    }

    /** The value LOAD carries for it (see {@link #forWorker()}). */
    public T workerValue(ModelSettings s) {
        if (toWorker == null) {
            throw new IllegalStateException(name + " is not sent to the worker");
        }
        return toWorker.apply(s);
    }

    /** Reads and checks {@code raw} from layer {@code source} and sets it (a null reading keeps the value). */
    void apply(ModelSettings s, Object raw, String source) {
        T v = value.read(name, raw, source);
        if (v != null) {
            set.accept(s, v);
        }
    }

    void reset(ModelSettings s) {
        set.accept(s, value.copy(defaultValue));
    }

    void copy(ModelSettings from, ModelSettings to) {
        set.accept(to, value.copy(get.apply(from)));
    }

    /** The management API's register parameter that sets it, or null. */
    public String apiParam() {
        return apiParam;
    }

    /** Whether its API parameter is read as an integer (true), or as a boolean or text (see {@link #apiBoolean}). */
    public boolean apiInteger() {
        return value.paramForm == ModelValue.ParamForm.INTEGER;
    }

    /** The JSON schema of its API parameter. */
    public String apiSchema() {
        return value.paramSchema();
    }

    /** Whether its API parameter is read as {@code true}/{@code false}. */
    public boolean apiBoolean() {
        return value.paramForm == ModelValue.ParamForm.BOOLEAN;
    }

    /** The value held in {@code s}. */
    public T get(ModelSettings s) {
        return get.apply(s);
    }

    /** What describe shows for it; null leaves it out. */
    Object described(ModelSettings s) {
        return shownValue == null ? get.apply(s) : shownValue.apply(s);
    }
}

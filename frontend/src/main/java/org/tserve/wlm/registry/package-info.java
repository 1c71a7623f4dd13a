/**
 * The model registry: models and their versions ({@link org.tserve.wlm.registry.Model},
 * {@link org.tserve.wlm.registry.ModelRegistry}), building a model from an archive and its settings, registering and
 * unregistering, and describing them.
 */
package org.tserve.wlm.registry;

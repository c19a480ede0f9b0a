// @ts-check
/**
 * The providers Settings offers for an agent, each with an example model name for its Model box:
 * the offline stand-in, OpenAI, Anthropic, a local Ollama and a coding agent (ACP). Ollama speaks
 * the OpenAI-compatible wire (`/v1/chat/completions`), so it is saved as an `openai` provider with
 * Ollama's own address filled in; an `openai` provider at that address is shown as Ollama again.
 * Pure: the form (settings.js) only reads these.
 */

/** Where a local Ollama listens for the OpenAI-compatible wire (its default port). */
export const OLLAMA_URL = "http://localhost:11434/v1";

/**
 * @typedef {{value: string, label: string, kind: string, example: string, address?: string, keyless?: boolean}} Choice
 */

/** @type {Choice[]} */
export const CHOICES = [
  { value: "offline", label: "offline (no model)", kind: "offline", example: "none needed: it answers without a model" },
  { value: "openai", label: "openai", kind: "openai", example: "e.g. gpt-4.1-mini" },
  { value: "anthropic", label: "anthropic", kind: "anthropic", example: "e.g. claude-sonnet-4-5" },
  { value: "ollama", label: "Ollama (on this machine)", kind: "openai", example: "e.g. llama3.2", address: OLLAMA_URL, keyless: true },
  { value: "acp", label: "coding agent (ACP)", kind: "acp", example: "" },
];

/** @param {string} value @returns {Choice} */
export function choice(value) {
  return CHOICES.find((c) => c.value === value) ?? CHOICES[0];
}

/**
 * Whether an address is a local Ollama's (localhost or 127.0.0.1, port 11434).
 * @param {string | null | undefined} address
 */
export function isOllama(address) {
  try {
    const url = new URL(address ?? "");
    return ["localhost", "127.0.0.1", "[::1]"].includes(url.hostname) && url.port === "11434";
  } catch {
    return false;
  }
}

/**
 * The choice an agent's saved provider is shown as.
 * @param {{kind?: string, base_url?: string | null} | null | undefined} provider
 */
export function choiceOf(provider) {
  if (provider?.kind === "openai" && isOllama(provider.base_url)) return "ollama";
  return choice(provider?.kind || "offline").value;
}

/**
 * The address box after the choice changes: a preset's own address replaces an empty box or
 * another preset's; an address the person typed is kept.
 * @param {string} value the new choice @param {string} address what the box holds now
 */
export function addressFor(value, address) {
  const preset = choice(value).address;
  const typed = address.trim();
  const anotherPreset = CHOICES.some((c) => c.address && c.address === typed);
  if (preset) return typed === "" || anotherPreset ? preset : typed;
  return anotherPreset ? "" : typed;
}

/**
 * Whether the administrator's policy allows a choice: its kind, and for a preset its address.
 * @param {import("./policy.js").Locked} locked @param {string} value
 * @param {(locked: import("./policy.js").Locked, kind: string) => boolean} kindAllowed
 */
export function choiceAllowed(locked, value, kindAllowed) {
  const picked = choice(value);
  if (!kindAllowed(locked, picked.kind)) return false;
  const urls = locked.providers?.base_urls;
  if (!picked.address || !Array.isArray(urls)) return true;
  const bare = (/** @type {string} */ u) => u.replace(/\/+$/, "");
  return urls.some((u) => bare(u) === bare(picked.address ?? ""));
}

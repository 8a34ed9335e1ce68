"""What Pam says outside the conversation itself: help, confirmations, apologies."""

from __future__ import annotations

HELP = """Here's what I understand:
/language <language> [native language] — what you want to practise, e.g. /language Spanish English
/level <A1–C2> — your level, e.g. /level B1
/profile — what I know about you
/review — practise the mistakes that are due
/progress — a chart of your last weeks: corrections, patterns learned, days practised
/voice on|off — my replies as voice messages too (send me voice notes any time)
/forget — erase everything I know about you
/help — this list

Anything else you write, I answer like a friend, and I point out mistakes along the way."""

WELCOME = (
    """Hi, I'm Pam! 👋 I'm a friend who speaks the language you're learning.
We just chat, and I gently correct your mistakes as we go.

{settings}

"""
    + HELP
)

NEEDS_LANGUAGE = (
    "Tell me which language you want to practise with /language, e.g. /language Spanish English."
)

FORGOTTEN = (
    "Done — I've erased everything I knew about you: our messages, the summary, your profile, "
    "your corrections and usage. If you write again, we start fresh."
)

# /forget in a group: only what Pam keeps of the member from that group is erased.
FORGOTTEN_IN_GROUP = (
    "Done — I've erased what I knew about you from this group: our messages here, the "
    "summary, your profile, corrections and usage. Our private chat is untouched (/forget "
    "there erases it)."
)

# /profile, /review and /progress in a group, in the target language: what Pam knows of one
# learner is not shown to the group; the private chat's link follows when Pam knows it.
PRIVATE_ONLY = {
    "English": "That stays between you and me 🙂 Ask me in our private chat!",
    "Spanish": "Eso queda entre tú y yo 🙂 ¡Pregúntame en nuestro chat privado!",
    "French": "Ça reste entre toi et moi 🙂 Demande-moi dans notre chat privé !",
    "German": "Das bleibt unter uns 🙂 Frag mich in unserem privaten Chat!",
    "Italian": "Questo resta tra noi 🙂 Chiedimelo nella nostra chat privata!",
    "Portuguese": "Isso fica entre nós 🙂 Me pergunta no nosso chat privado!",
    "Dutch": "Dat blijft tussen ons 🙂 Vraag het me in onze privéchat!",
}


def private_only(target_language: str | None, link: str | None) -> str:
    """The note that a command about the learner alone is answered in private, with the
    link to the private chat when there is one."""
    note = _in(target_language, PRIVATE_ONLY)
    return f"{note}\n{link}" if link else note


TOO_LONG = (
    "That's a long message! 😅 Could you send it in smaller parts (under {limit} characters "
    "each)? Then I can answer properly."
)

# Said in the target language when the LLM stays unreachable; the message itself is kept.
APOLOGIES = {
    "English": "Sorry, my head is a bit foggy right now 😅 Give me a minute and write again?",
    "Spanish": "Perdona, ahora mismo estoy un poco espeso 😅 ¿Me escribes otra vez en un minuto?",
    "French": "Désolée, j'ai un petit bug dans la tête 😅 Tu peux me réécrire dans une minute ?",
    "German": "Sorry, ich bin gerade etwas durcheinander 😅 Schreibst du mir gleich nochmal?",
    "Italian": "Scusa, ho la testa un po' tra le nuvole 😅 Mi riscrivi tra un minuto?",
    "Portuguese": "Desculpa, estou meio confusa agora 😅 Me escreve de novo daqui a um minuto?",
    "Dutch": "Sorry, ik ben even de draad kwijt 😅 Stuur je het zo nog een keer?",
}


def apology(target_language: str | None) -> str:
    """A short apology, in the learner's target language when Pam knows it."""
    return _in(target_language, APOLOGIES)


# Answers to what Pam cannot read yet, in the target language: voice notes, and other media
# (photos, stickers, documents, locations, contacts, polls).
NOT_TEXT = {
    "voice": {
        "English": "I can only read text for now — could you write that to me? 🙂",
        "Spanish": "Por ahora solo puedo leer texto — ¿me lo escribes? 🙂",
        "French": "Pour l'instant je ne lis que le texte — tu peux me l'écrire ? 🙂",
        "German": "Ich kann im Moment nur Text lesen — schreibst du es mir? 🙂",
        "Italian": "Per ora leggo solo il testo — me lo scrivi? 🙂",
        "Portuguese": "Por enquanto só consigo ler texto — você me escreve? 🙂",
        "Dutch": "Ik kan voorlopig alleen tekst lezen — schrijf je het me? 🙂",
    },
    "media": {
        "English": "I can't see that — I only read text for now. Tell me about it in words? 🙂",
        "Spanish": "No puedo verlo — por ahora solo leo texto. ¿Me lo cuentas con palabras? 🙂",
        "French": "Je ne peux pas le voir — je ne lis que le texte. Tu me le décris ? 🙂",
        "German": "Das kann ich nicht sehen — ich lese nur Text. Beschreibst du es mir? 🙂",
        "Italian": "Non riesco a vederlo — leggo solo testo. Me lo descrivi a parole? 🙂",
        "Portuguese": "Não consigo ver isso — só leio texto. Me conta com palavras? 🙂",
        "Dutch": "Dat kan ik niet zien — ik lees alleen tekst. Vertel je het in woorden? 🙂",
    },
}


# Cost and abuse limits, in the target language: too many messages a minute, the learner's
# daily token budget, the operator's daily budget for everyone.
SLOW_DOWN = {
    "English": "Whoa, that's a lot of messages at once! 😅 Give me a minute to catch up?",
    "Spanish": "¡Uy, cuántos mensajes de golpe! 😅 ¿Me das un minuto para ponerme al día?",
    "French": "Oh là, beaucoup de messages d'un coup ! 😅 Tu me laisses une minute ?",
    "German": "Oha, so viele Nachrichten auf einmal! 😅 Gibst du mir eine Minute?",
    "Italian": "Wow, quanti messaggi tutti insieme! 😅 Mi dai un minuto?",
    "Portuguese": "Nossa, quantas mensagens de uma vez! 😅 Me dá um minutinho?",
    "Dutch": "Wauw, zoveel berichten tegelijk! 😅 Geef je me even een minuutje?",
}
LEARNER_BUDGET = {
    "English": "We've chatted a lot today — I need a rest! 😴 Let's talk again tomorrow?",
    "Spanish": "¡Hoy hemos hablado muchísimo y necesito descansar! 😴 ¿Seguimos mañana?",
    "French": "On a beaucoup parlé aujourd'hui, j'ai besoin de repos ! 😴 On reprend demain ?",
    "German": "Wir haben heute so viel geredet — ich brauche eine Pause! 😴 Morgen weiter?",
    "Italian": "Oggi abbiamo parlato tantissimo, ho bisogno di riposare! 😴 Continuiamo domani?",
    "Portuguese": "Hoje conversamos muito, preciso descansar! 😴 Continuamos amanhã?",
    "Dutch": "We hebben vandaag veel gekletst — ik moet even rusten! 😴 Morgen verder?",
}
SERVICE_BUDGET = {
    "English": "I'm taking a little break right now 😴 — please write again later!",
    "Spanish": "Ahora mismo estoy tomándome un descanso 😴 — ¡escríbeme más tarde!",
    "French": "Je fais une petite pause en ce moment 😴 — réécris-moi plus tard !",
    "German": "Ich mache gerade eine kleine Pause 😴 — schreib mir später wieder!",
    "Italian": "Sto facendo una pausa adesso 😴 — riscrivimi più tardi!",
    "Portuguese": "Estou fazendo uma pausa agora 😴 — me escreve mais tarde!",
    "Dutch": "Ik neem nu even pauze 😴 — schrijf me later nog eens!",
}


# When the model refuses to answer or its provider's content filter stops the answer: a light
# change of subject, in the target language (the provider's reason goes to the log only).
REFUSED = {
    "English": "Hmm, I'd rather not talk about that 🙂 Shall we chat about something else?",
    "Spanish": "Mmm, prefiero no hablar de eso 🙂 ¿Hablamos de otra cosa?",
    "French": "Hmm, je préfère ne pas parler de ça 🙂 On parle d'autre chose ?",
    "German": "Hm, darüber rede ich lieber nicht 🙂 Wollen wir über etwas anderes reden?",
    "Italian": "Mmm, preferisco non parlarne 🙂 Parliamo d'altro?",
    "Portuguese": "Hmm, prefiro não falar disso 🙂 Vamos conversar sobre outra coisa?",
    "Dutch": "Hm, daar praat ik liever niet over 🙂 Zullen we het ergens anders over hebben?",
}


# Voice notes Pam could not listen to, in the target language (the note itself is kept, as a
# voice note not transcribed). "{minutes}" is the length cap.
VOICE_TOO_LONG = {
    "English": "That voice note is a bit long for me 😅 Could you keep it under {minutes} minutes?",
    "Spanish": "Ese audio es un poco largo para mí 😅 ¿Me mandas uno de menos de {minutes} "
    "minutos?",
    "French": "Ce message vocal est un peu long pour moi 😅 Tu peux rester sous {minutes} "
    "minutes ?",
    "German": "Die Sprachnachricht ist mir etwas zu lang 😅 Schaffst du es unter {minutes} "
    "Minuten?",
    "Italian": "Questo vocale è un po' lungo per me 😅 Me ne mandi uno sotto i {minutes} minuti?",
    "Portuguese": "Esse áudio é meio longo para mim 😅 Pode mandar um com menos de {minutes} "
    "minutos?",
    "Dutch": "Dat spraakbericht is wat lang voor me 😅 Lukt het onder de {minutes} minuten?",
}
VOICE_UNREADABLE = {
    "English": "I couldn't play that voice note 🙉 Could you record it again?",
    "Spanish": "No he podido escuchar ese audio 🙉 ¿Lo grabas otra vez?",
    "French": "Je n'ai pas réussi à écouter ce message vocal 🙉 Tu peux le réenregistrer ?",
    "German": "Ich konnte die Sprachnachricht nicht abspielen 🙉 Nimmst du sie nochmal auf?",
    "Italian": "Non sono riuscita ad ascoltare questo vocale 🙉 Me lo registri di nuovo?",
    "Portuguese": "Não consegui ouvir esse áudio 🙉 Pode gravar de novo?",
    "Dutch": "Ik kon dat spraakbericht niet afspelen 🙉 Neem je het nog eens op?",
}
VOICE_NO_SOUND = {
    "English": "I can't hear anything in that video 🙉 Try a voice note, or tell me in words?",
    "Spanish": "No oigo nada en ese vídeo 🙉 ¿Me mandas un audio o me lo escribes?",
    "French": "Je n'entends rien dans cette vidéo 🙉 Un message vocal, ou tu me l'écris ?",
    "German": "In dem Video höre ich nichts 🙉 Schickst du eine Sprachnachricht oder schreibst es?",
    "Italian": "Non sento niente in questo video 🙉 Mi mandi un vocale o me lo scrivi?",
    "Portuguese": "Não ouço nada nesse vídeo 🙉 Manda um áudio ou me escreve?",
    "Dutch": "Ik hoor niets in die video 🙉 Stuur je een spraakbericht, of schrijf je het?",
}
VOICE_SILENT = {
    "English": "I couldn't hear any words in that one 🤔 Could you say it again, a bit closer?",
    "Spanish": "No he oído ninguna palabra 🤔 ¿Lo repites un poco más cerca del micro?",
    "French": "Je n'ai entendu aucun mot 🤔 Tu peux répéter, un peu plus près du micro ?",
    "German": "Ich habe keine Worte gehört 🤔 Sagst du es nochmal, etwas näher am Mikro?",
    "Italian": "Non ho sentito nessuna parola 🤔 Lo ripeti un po' più vicino al microfono?",
    "Portuguese": "Não ouvi nenhuma palavra 🤔 Pode repetir, um pouco mais perto do microfone?",
    "Dutch": "Ik hoorde geen woorden 🤔 Zeg je het nog eens, wat dichter bij de microfoon?",
}
VOICE_FAILED = {
    "English": "Sorry, I can't listen to voice notes right now 😅 Could you write it, or send "
    "it again later?",
    "Spanish": "Perdona, ahora mismo no puedo escuchar audios 😅 ¿Me lo escribes o me lo "
    "mandas luego?",
    "French": "Désolée, je ne peux pas écouter de vocaux pour l'instant 😅 Tu me l'écris, ou "
    "tu le renvoies plus tard ?",
    "German": "Sorry, ich kann gerade keine Sprachnachrichten anhören 😅 Schreibst du es, oder "
    "schickst es später nochmal?",
    "Italian": "Scusa, adesso non riesco ad ascoltare i vocali 😅 Me lo scrivi o me lo rimandi "
    "più tardi?",
    "Portuguese": "Desculpa, agora não consigo ouvir áudios 😅 Me escreve ou manda de novo "
    "mais tarde?",
    "Dutch": "Sorry, ik kan nu geen spraakberichten luisteren 😅 Schrijf je het, of stuur je "
    "het later nog eens?",
}

# /voice: spoken replies on and off (in English, like the other commands' answers).
VOICE_ON = (
    "🔊 Voice replies are on: I'll send my answers as voice messages too (corrections stay "
    "in writing). /voice off to stop."
)
VOICE_OFF = "🔇 Voice replies are off: I'll answer in writing only. /voice on to hear me again."
VOICE_UNAVAILABLE = "🔇 Voice replies aren't available here yet, so I'll keep answering in writing."
VOICE_USAGE = "Say /voice on to get my replies as voice messages too, or /voice off to stop."


def in_language(texts: dict[str, str], target_language: str | None) -> str:
    """One of `texts` (keyed by English language names), in the target language when there
    is one for it, else English."""
    return _in(target_language, texts)


def _in(language: str | None, texts: dict[str, str]) -> str:
    base = (language or "English").split(" (")[0]
    return texts.get(base, texts["English"])


def not_text(kind: str, target_language: str | None) -> str:
    """The friendly answer to a voice note or other media, in the target language."""
    return _in(target_language, NOT_TEXT["voice" if kind == "voice" else "media"])

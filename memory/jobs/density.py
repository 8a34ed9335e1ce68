"""Which learner messages carry nothing a profile could learn from: greetings,
acknowledgements, laughter and emoji, in the languages learners practise. The profile job
skips its LLM call when every new message is like that."""

from __future__ import annotations

import re
import unicodedata

# Whole messages made only of these words (after lower-casing and dropping punctuation and
# emoji) say nothing about the learner.
_FILLER_WORDS = """
    ok okay okey k kk oki okie yes yeah yep yup ya no nope nah sure cool nice great good fine
    thanks thank you thx ty tysm cheers hi hello hey hiya yo bye goodbye cya see later night
    morning evening afternoon wow oh ah aha hmm hm mm lol lmao rofl omg right alright true
    indeed exactly pam
    sí si vale gracias muchas de nada hola adiós adios chao chau buenas bueno bien claro vale
    perfecto genial guay ya jaja jajaja jeje jejeje ajá aja oye venga buenos noches tardes
    días dias que
    oui non merci beaucoup salut bonjour bonsoir coucou ciao super parfait génial bon ouais
    d'accord daccord dac mdr ptdr bah ben bonne nuit journée soirée
    ja jo nein danke schön schon hallo tschüss tschuess servus moin gut super genau klar okay
    prima toll gute guten nacht morgen abend tag bis später dann alles
    sì grazie mille ciao ok perfetto bene benissimo buongiorno buonasera buonanotte certo dai
    sim não nao obrigado obrigada valeu oi olá ola tchau beleza tá ta kkk kkkk rs bom boa dia
    noite tarde
    dank je wel bedankt hoi doei prima goed
    はい いいえ ありがとう どうも うん 了解 谢谢 好 好的 嗯 哈哈 是 对 ok
"""
FILLERS = frozenset(_FILLER_WORDS.split())
LAUGHTER = re.compile(r"^(?:[hjk][aeiou]){2,}[hjk]?$|^(?:a?ha)+h?$|^k{2,}$|^(?:ja|je|ha|he)+s?$")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


def is_low_information(text: str) -> bool:
    """True when `text` is only greetings, thanks, acknowledgements, laughter or emoji."""
    text = unicodedata.normalize("NFC", text).casefold()
    words = _WORD.findall(text)
    if not words:  # emoji, punctuation, stickers rendered as symbols
        return True
    return all(word in FILLERS or LAUGHTER.match(word) for word in words)
